// Tollgate dashboard: progressive enhancement only. The pages work without this file;
// it adds a copy button next to a new key's value. It sends nothing anywhere.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    var status = button.closest(".field").querySelector("[data-copy-status]");
    if (!field || !navigator.clipboard) {
      return; // the value stays selectable by hand
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(field.value).then(function () {
        if (status) status.textContent = "Copied to the clipboard.";
      }, function () {
        field.select();
        if (status) status.textContent = "Copying is not allowed here: the value is selected, copy it with your keyboard.";
      });
    });
  });
  document.querySelectorAll("input[data-secret]").forEach(function (field) {
    field.addEventListener("focus", function () { field.select(); });
  });
});
