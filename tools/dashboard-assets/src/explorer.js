// The dashboard's GraphQL explorer: a CodeMirror 6 editor with cm6-graphql (completion,
// lint and hover from the schema introspected from the gateway), the query's cost
// before it runs (from the dashboard's graphql/cost, which asks the gateway's own
// Estimate), a Run button, and a browser of the schema's types and fields.
//
// Everything goes to the page's own origin: the gateway with the session cookie and
// the session's CSRF token (X-CSRF-Token), and the dashboard's cost endpoint. The page
// holds no key. CodeMirror writes its styles into one <style> element that carries the
// nonce of the page's Content-Security-Policy (read from this script's own nonce).
import { EditorView, keymap, lineNumbers, drawSelection, highlightActiveLine, hoverTooltip } from "@codemirror/view";
import { EditorState } from "@codemirror/state";
import { defaultKeymap, history, historyKeymap } from "@codemirror/commands";
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap } from "@codemirror/autocomplete";
import { lintKeymap } from "@codemirror/lint";
import { bracketMatching, HighlightStyle, indentOnInput, syntaxHighlighting } from "@codemirror/language";
import { tags } from "@lezer/highlight";
import { graphql, offsetToPos, updateSchema } from "cm6-graphql";
import { getHoverInformation } from "graphql-language-service";
import {
  buildClientSchema, getIntrospectionQuery, getNamedType, isEnumType, isInputObjectType, isInterfaceType,
  isObjectType, isScalarType, isUnionType, parse,
} from "graphql";

const nonce = (document.currentScript && document.currentScript.nonce) || "";

// Colours that meet WCAG AA contrast on the editor's white background.
const highlight = HighlightStyle.define([
  { tag: [tags.keyword, tags.definitionKeyword, tags.modifier], color: "#7e22ce" },
  { tag: tags.propertyName, color: "#1d4ed8" },
  { tag: tags.attributeName, color: "#9a3412" },
  { tag: tags.string, color: "#166534" },
  { tag: [tags.integer, tags.float, tags.bool, tags.null, tags.special(tags.name)], color: "#0f766e" },
  { tag: tags.variableName, color: "#be123c" },
  { tag: tags.lineComment, color: "#4b5563", fontStyle: "italic" },
  { tag: tags.atom, color: "#92400e" },
]);

const theme = EditorView.theme({
  "&": { border: "1px solid #6b7280", borderRadius: ".375rem", fontSize: ".875rem", backgroundColor: "#fff" },
  "&.cm-focused": { outline: "3px solid #b45309", outlineOffset: "2px" },
  ".cm-content": { fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace", minHeight: "12rem" },
  ".cm-scroller": { fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" },
  ".cm-gutters": { backgroundColor: "#f3f4f6", color: "#4b5563", borderRight: "1px solid #d1d5db" },
  ".cm-activeLine": { backgroundColor: "#eff6ff" },
  ".cm-activeLineGutter": { backgroundColor: "#dbeafe", color: "#1f2937" },
  ".cm-tooltip": { maxWidth: "min(32rem, 90vw)" },
  ".cm-tooltip.cm-hover": { padding: ".375rem .5rem", whiteSpace: "pre-wrap" },
});

function $(selector, root = document) {
  return root.querySelector(selector);
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function formatInt(n) {
  return Number(n).toLocaleString("en-US");
}

function credits(n) {
  return formatInt(n) + (Number(n) === 1 ? " credit" : " credits");
}

// The explorer's state and its parts of the page.
class Explorer {
  constructor(root) {
    this.root = root;
    this.endpoint = root.dataset.endpoint;
    this.costPath = root.dataset.cost;
    this.csrf = root.dataset.csrf;
    this.schema = null;
    this.estimateSeq = 0;
    this.estimateTimer = 0;
    this.estimateAbort = null;
    this.variables = $("#variables");
    this.runButton = $("#run");
    this.schemaStatus = $("#schema-status");
    this.runStatus = $('[data-field="run-status"]', root);
    this.result = $("#result");
    this.browser = new SchemaBrowser($("#schema-browser"));
    this.view = this.createEditor($("#query-editor"));
    this.runButton.addEventListener("click", () => this.run());
    this.variables.addEventListener("input", () => this.scheduleEstimate());
    this.runButton.disabled = false;
    this.loadSchema();
  }

  createEditor(parent) {
    const run = () => { this.run(); return true; };
    return new EditorView({
      parent,
      state: EditorState.create({
        doc: "",
        extensions: [
          EditorView.cspNonce.of(nonce),
          lineNumbers(), history(), drawSelection(), highlightActiveLine(), bracketMatching(), closeBrackets(),
          indentOnInput(), autocompletion(), syntaxHighlighting(highlight), theme,
          graphql(undefined, { onShowInDocs: (field, type, parentType) => this.browser.showInDocs(field, type, parentType) }),
          hoverTooltip((view, pos) => this.hover(view, pos)),
          keymap.of([{ key: "Mod-Enter", run, preventDefault: true },
            ...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, ...completionKeymap, ...lintKeymap]),
          EditorView.contentAttributes.of({ "aria-labelledby": "query-heading", "aria-describedby": "query-hint" }),
          EditorView.updateListener.of((u) => { if (u.docChanged) this.scheduleEstimate(); }),
        ],
      }),
    });
  }

  // hover shows the schema's description of the name under the pointer.
  hover(view, pos) {
    if (!this.schema) return null;
    const text = view.state.doc.toString();
    const info = getHoverInformation(this.schema, text, offsetToPos(view.state.doc, pos));
    if (!info || (Array.isArray(info) && info.length === 0)) return null;
    const plain = String(info).split("\n").filter((l) => !l.startsWith("```")).join("\n").trim();
    if (!plain) return null;
    const word = view.state.wordAt(pos);
    return {
      pos: word ? word.from : pos, end: word ? word.to : pos, above: true,
      create: () => ({ dom: el("div", { text: plain }) }),
    };
  }

  // post sends a JSON request to the page's origin with the session's CSRF token.
  post(path, body, signal) {
    return fetch(path, {
      method: "POST", credentials: "same-origin", signal, cache: "no-store",
      headers: { "Content-Type": "application/json", "Accept": "application/graphql-response+json, application/json", "X-CSRF-Token": this.csrf },
      body: JSON.stringify(body),
    });
  }

  async loadSchema() {
    try {
      const res = await this.post(this.endpoint, { query: getIntrospectionQuery({ descriptions: true }) });
      const body = await res.json();
      if (!res.ok || !body.data) {
        throw new Error(body.errors && body.errors[0] ? body.errors[0].message : "the gateway answered " + res.status);
      }
      this.schema = buildClientSchema(body.data);
    } catch (err) {
      this.schemaStatus.textContent = "The schema could not be loaded (" + err.message + "): queries still run, without completion.";
      this.scheduleEstimate();
      return;
    }
    updateSchema(this.view, this.schema);
    this.schemaStatus.textContent = "Schema loaded: " + Object.keys(this.schema.getQueryType().getFields()).length + " APIs.";
    this.browser.setSchema(this.schema);
    if (this.view.state.doc.length === 0) {
      this.view.dispatch({ changes: { from: 0, insert: sampleQuery(this.schema) } });
    }
    this.scheduleEstimate();
  }

  // request returns the GraphQL request of the editor: the query, the operation at the
  // cursor when there are several, and the variables (or an error message).
  request() {
    const query = this.view.state.doc.toString();
    let variables = {};
    const text = this.variables.value.trim();
    if (text) {
      try {
        variables = JSON.parse(text);
      } catch (err) {
        return { error: "The variables are not valid JSON: " + err.message };
      }
      if (variables === null || typeof variables !== "object" || Array.isArray(variables)) {
        return { error: "The variables must be a JSON object, such as {\"text\": \"hello\"}." };
      }
    }
    const req = { query, variables };
    const op = operationAt(query, this.view.state.selection.main.head);
    if (op) req.operationName = op;
    return req;
  }

  scheduleEstimate() {
    clearTimeout(this.estimateTimer);
    this.estimateTimer = setTimeout(() => this.estimate(), 250);
  }

  // estimate shows the cost of the editor's query, and marks the verdict with the
  // query it judged (data-query).
  async estimate() {
    const seq = ++this.estimateSeq;
    if (this.estimateAbort) this.estimateAbort.abort();
    this.estimateAbort = new AbortController();
    const req = this.request();
    const verdict = $('[data-field="estimate-verdict"]', this.root);
    const say = (className, code, text) => {
      verdict.className = className;
      verdict.dataset.code = code;
      verdict.dataset.query = req.query || "";
      verdict.textContent = text;
    };
    if (req.error) {
      this.showEstimate(null);
      say("error", "", req.error);
      return;
    }
    if (!req.query.trim()) {
      this.showEstimate(null);
      say("", "", "Type a query to see its cost.");
      return;
    }
    let res, body;
    try {
      res = await this.post(this.costPath, req, this.estimateAbort.signal);
      body = await res.json();
    } catch (err) {
      if (err.name === "AbortError") return;
      body = { error: "the cost cannot be read now (" + err.message + ")" };
    }
    if (seq !== this.estimateSeq) return; // a later estimate is on its way
    if (body.error) {
      this.showEstimate(null);
      say("error", "", "The cost is unknown: " + body.error + ".");
      return;
    }
    this.showEstimate(body);
    if (body.refusal) {
      say("error", body.refusal.code, "The gateway would refuse this query (" + body.refusal.code + "): " + body.refusal.message);
    } else {
      say("notice", "", body.apis.length === 0
        ? "This query names no API: it costs nothing."
        : "The gateway would run this query for " + credits(body.credits) + ".");
    }
  }

  showEstimate(e) {
    const set = (name, value, text) => {
      const node = $(`[data-field="${name}"]`, this.root);
      node.dataset.value = value == null ? "" : String(value);
      node.textContent = text == null ? "—" : text;
    };
    const list = $('[data-field="estimate-list"]', this.root);
    list.replaceChildren();
    if (!e) {
      set("estimate-credits", null, null);
      set("estimate-apis", null, null);
      return;
    }
    set("estimate-credits", e.credits, credits(e.credits));
    set("estimate-apis", e.apis.length, e.max_apis > 0
      ? `${e.apis.length} of at most ${e.max_apis} per query (${e.plan} plan)`
      : `${e.apis.length} (the ${e.plan} plan sets no cap)`);
    set("estimate-balance", e.balance, credits(e.balance));
    for (const api of e.apis) {
      list.append(el("li", { "data-api": api.id },
        el("code", { text: api.field }), ` (${api.id}): ${credits(api.cost)}`));
    }
  }

  async run() {
    const req = this.request();
    if (req.error) {
      this.runStatus.className = "error";
      this.runStatus.textContent = req.error;
      return;
    }
    this.runButton.disabled = true;
    this.runStatus.className = "";
    this.runStatus.textContent = "Running…";
    try {
      const res = await this.post(this.endpoint, req);
      const text = await res.text();
      let shown = text;
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON: shown as it came */ }
      this.result.textContent = shown;
      this.result.parentElement.hidden = false;
      const cost = res.headers.get("X-Credits-Cost");
      const remaining = res.headers.get("X-Credits-Remaining");
      // The part of the balance that grants hold: they carry over when the allowance renews.
      const granted = res.headers.get("X-Credits-Granted");
      const charged = $('[data-field="run-status"]', this.root);
      charged.dataset.cost = cost || "0";
      charged.dataset.remaining = remaining || "";
      charged.dataset.granted = granted || "";
      let status = `${res.ok ? "Ran" : "Refused"} (HTTP ${res.status}): `;
      status += cost && cost !== "0" ? "charged " + credits(cost) : "not charged";
      if (remaining) {
        status += `; ${credits(remaining)} remain`;
        if (granted && granted !== "0") status += `, ${formatInt(granted)} of them granted`;
        status += ".";
      }
      if (res.status === 401) status += " Your session has ended: sign in again.";
      charged.className = res.ok ? "notice" : "error";
      charged.textContent = status;
    } catch (err) {
      this.runStatus.className = "error";
      this.runStatus.textContent = "The query could not be sent: " + err.message;
    } finally {
      this.runButton.disabled = false;
      this.scheduleEstimate(); // the balance has moved
    }
  }
}

// operationAt returns the name of the operation at offset when the query has several,
// or "" (the gateway runs a query's only operation).
function operationAt(query, offset) {
  let doc;
  try {
    doc = parse(query);
  } catch {
    return "";
  }
  const ops = doc.definitions.filter((d) => d.kind === "OperationDefinition");
  if (ops.length < 2) return "";
  const op = ops.find((d) => d.loc && d.loc.start <= offset && offset <= d.loc.end) || ops[0];
  return op.name ? op.name.value : "";
}

// sampleQuery returns a first query: the first API without required arguments, or
// else whose required arguments are all strings, given "hello"; with its scalar fields.
function sampleQuery(schema) {
  const fields = Object.values(schema.getQueryType().getFields());
  const required = (f) => f.args.filter((a) => String(a.type).endsWith("!"));
  const ok = fields.find((f) => required(f).length === 0) ||
    fields.find((f) => required(f).every((a) => String(a.type) === "String!"));
  if (!ok) return "{\n  \n}\n";
  const args = ok.args.filter((a) => String(a.type) === "String!").map((a) => `${a.name}: "hello"`);
  const type = getNamedType(ok.type);
  let selection = "";
  if (isObjectType(type)) {
    const names = Object.values(type.getFields()).filter((f) => isScalarType(getNamedType(f.type)) || isEnumType(getNamedType(f.type))).map((f) => f.name);
    selection = names.length ? ` {\n    ${names.join("\n    ")}\n  }` : "";
  }
  return `# Ctrl+Space suggests what may come next; Ctrl+Enter runs the query.\n{\n  ${ok.name}${args.length ? "(" + args.join(", ") + ")" : ""}${selection}\n}\n`;
}

// A SchemaBrowser shows the schema's types: the root type's fields (the APIs) first,
// each type's fields with their arguments, types and descriptions; a type's name opens
// it, and the trail leads back.
class SchemaBrowser {
  constructor(root) {
    this.root = root;
    this.schema = null;
    this.trail = [];
  }

  setSchema(schema) {
    this.schema = schema;
    this.trail = [schema.getQueryType().name];
    this.render();
  }

  showInDocs(field, type, parentType) {
    if (!this.schema) return;
    const name = parentType ? getNamedType(this.schema.getType(parentType.replace(/[[\]!]/g, ""))) : null;
    const target = name ? name.name : type ? type.replace(/[[\]!]/g, "") : null;
    if (!target || !this.schema.getType(target)) return;
    this.open(target, field);
  }

  open(typeName, field) {
    const at = this.trail.indexOf(typeName);
    if (at >= 0) this.trail = this.trail.slice(0, at + 1);
    else this.trail.push(typeName);
    this.render(field);
    const heading = $("h3", this.root);
    if (heading) heading.focus();
  }

  typeLink(type) {
    const named = getNamedType(type);
    const label = String(type);
    if (isScalarType(named)) return el("code", { text: label });
    return el("button", { type: "button", class: "linklike", "data-type": named.name, onclick: () => this.open(named.name), text: label });
  }

  render(focusField) {
    const type = this.schema.getType(this.trail[this.trail.length - 1]);
    const trail = el("nav", { "aria-label": "Schema trail", class: "schema-trail", hidden: "" });
    if (this.trail.length > 1) trail.hidden = false;
    const ol = el("ol");
    this.trail.forEach((name, i) => {
      const last = i === this.trail.length - 1;
      ol.append(el("li", {}, last
        ? el("span", { "aria-current": "location", text: name })
        : el("button", { type: "button", class: "linklike", onclick: () => this.open(name), text: name })));
    });
    trail.append(ol);
    const body = [trail, el("h3", { tabindex: "-1", "data-schema-type": type.name, text: type.name })];
    const kind = isObjectType(type) ? "object type" : isInputObjectType(type) ? "input type" : isEnumType(type) ? "enum"
      : isInterfaceType(type) ? "interface" : isUnionType(type) ? "union" : "scalar";
    body.push(el("p", { class: "hint", text: type === this.schema.getQueryType() ? "The root type: each field is an API." : "A " + kind + "." }));
    if (type.description) body.push(el("p", { text: type.description }));
    if (isObjectType(type) || isInterfaceType(type) || isInputObjectType(type)) {
      const dl = el("dl", { class: "schema-fields" });
      for (const f of Object.values(type.getFields())) {
        const dt = el("dt", { id: "schema-field-" + f.name, "data-field-name": f.name }, el("code", { class: "field-name", text: f.name }));
        if (f.args && f.args.length) {
          dt.append("(");
          f.args.forEach((a, i) => {
            if (i) dt.append(", ");
            dt.append(el("code", { text: a.name + ": " }), this.typeLink(a.type));
          });
          dt.append(")");
        }
        dt.append(": ", this.typeLink(f.type));
        const dd = el("dd");
        if (f.description) dd.append(el("p", { text: f.description }));
        if (f.args && f.args.length) {
          const ul = el("ul", { class: "plain" });
          for (const a of f.args) {
            let text = " " + (a.description || "");
            if (a.defaultValue !== undefined) text += ` (default ${JSON.stringify(a.defaultValue)})`;
            ul.append(el("li", {}, el("code", { text: a.name }), text));
          }
          dd.append(ul);
        }
        if (f.deprecationReason) dd.append(el("p", { class: "warning", text: "Deprecated: " + f.deprecationReason }));
        dl.append(dt, dd);
      }
      body.push(dl);
    } else if (isEnumType(type)) {
      body.push(el("ul", { class: "plain" }, ...type.getValues().map((v) => el("li", {}, el("code", { text: v.name }), v.description ? " " + v.description : ""))));
    } else if (isUnionType(type)) {
      body.push(el("p", {}, "One of: ", ...type.getTypes().flatMap((t, i) => (i ? [", ", this.typeLink(t)] : [this.typeLink(t)]))));
    }
    this.root.replaceChildren(...body);
    if (focusField) {
      const target = $(`#schema-field-${CSS.escape(focusField)}`, this.root);
      if (target) target.scrollIntoView({ block: "nearest" });
    }
  }
}

function start() {
  const root = document.getElementById("explorer");
  if (root) new Explorer(root);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
