// The dashboard's API reference: Swagger UI draws the service's OpenAPI document.
// It fetches that document from the page's own origin and nothing else: the validator
// badge (which would send the document's address to validator.swagger.io) is off, the
// configuration cannot come from the page's URL, and "Try it out" is off (a call needs
// a key, which the page never holds).
import SwaggerUIBundle from "swagger-ui-dist/swagger-ui-bundle.js";

function start() {
  const root = document.getElementById("reference");
  if (!root) return;
  const status = document.getElementById("reference-status");
  const target = document.createElement("div");
  root.append(target);
  fetch(root.dataset.spec, { credentials: "omit", headers: { Accept: "application/json" } })
    .then((res) => {
      if (!res.ok) throw new Error("the service answered " + res.status);
      return res.json();
    })
    .then((spec) => draw(target, spec, status))
    .catch((err) => {
      if (status) status.textContent = "The OpenAPI document could not be loaded: " + err.message + ".";
    });
}

function draw(target, spec, status) {
  // The document's schemas are JSON Schema 2020-12 and say so in jsonSchemaDialect;
  // Swagger UI knows only OpenAPI's own dialect (2020-12 with OpenAPI's keywords) and
  // would print a warning over the reference: it gets the document without the field,
  // which reads the same in its dialect.
  if (spec.jsonSchemaDialect === "https://json-schema.org/draft/2020-12/schema") delete spec.jsonSchemaDialect;
  SwaggerUIBundle({
    domNode: target,
    spec,
    validatorUrl: null,
    queryConfigEnabled: false,
    supportedSubmitMethods: [],
    tryItOutEnabled: false,
    deepLinking: false,
    displayOperationId: false,
    defaultModelsExpandDepth: 0,
    docExpansion: "list",
    showExtensions: true,
    withCredentials: false,
    onComplete: () => {
      if (status) status.remove();
    },
  });
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
