// Drives the dashboard in Debian's Chromium with playwright-core, for
// dashboard/browser_test.go, which starts the server and reads this script's output.
//
//   node dashboard-e2e.mjs <config.json>
//
// The config: {base, evil, key, scoped, flush, hook, chromium, out}; flush is a URL whose POST
// flushes the usage recorded so far, scoped the value of a sub-key limited to one API. base is the host's root URL (the
// dashboard is at base/dashboard/), evil the root of another site's server that serves
// a page posting a form to the dashboard, key the primary key's value, hook the URL of
// a webhook receiver that answers 204 (a deliverer delivers the service's outbox),
// chromium the browser's path, out the directory for the screenshots.
//
// It prints one JSON line per check: {"check", "ok", "detail"}, and {"event", ...}
// lines the Go test uses. It exits 0 when it ran to the end (the checks say whether
// they passed), 1 when it could not.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { chromium } from "playwright-core";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const dash = cfg.base + "/dashboard/";

// patience is how long, in milliseconds, a wait lasts before it fails: every wait of
// the browser's (a navigation, an element, a function) and the browser's start. A busy
// machine may be slow, and a test must not fail for it: a wait ends as soon as what it
// waits for comes, and fails only when it does not come for minutes. (Playwright's own
// default is 30 seconds, which a loaded CI machine has exceeded.)
const patience = 5 * 60_000;
// retryAfter is how long an attempt that may have been lost (a key CodeMirror ignored)
// waits before it is made again.
const retryAfter = 60_000;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}
function check(name, ok, detail = "") {
  emit({ check: name, ok: !!ok, detail: String(detail) });
}

// balance returns the account's remaining credits, as GET /v1/account answers them.
async function balance(key) {
  return (await account(key)).balance.remaining;
}

// account returns GET /v1/account of a key.
async function account(key) {
  const res = await fetch(cfg.base + "/v1/account", { headers: { "x-api-key": key } });
  return (await res.json()).data;
}

// rest calls an API over REST with a key and returns the status.
async function rest(api, key) {
  const res = await fetch(cfg.base + "/v1/" + api, { headers: { "x-api-key": key } });
  await res.arrayBuffer();
  return res.status;
}

const widths = { desktop: 1280, phone: 390 };
const cspErrors = [];

// visit records a page: axe-core finds no serious or critical violation, and it is
// screenshotted at each width.
async function visit(page, name) {
  await page.evaluate(axeSource);
  for (const [label, width] of Object.entries(widths)) {
    await page.setViewportSize({ width, height: label === "phone" ? 844 : 900 });
    const result = await page.evaluate(() =>
      window.axe.run(document, { resultTypes: ["violations"] }));
    const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
    check(`axe ${name} ${label}`, bad.length === 0,
      bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`).join("; "));
    await page.screenshot({ path: join(cfg.out, `${name}-${label}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: widths.desktop, height: 900 });
}

// textNow returns the text of the locator's elements as they are now, or none when
// there is none: for a check's detail, which must not wait (a locator's textContent
// waits for its element as long as patience).
async function textNow(locator, none) {
  const texts = await locator.allTextContents();
  return texts.length ? texts.join(" ") : none;
}

async function field(page, name) {
  return page.locator(`[data-field="${name}"]`).first().getAttribute("data-value");
}

// analytics returns GET /v1/analytics of the primary key.
async function analytics() {
  return (await (await fetch(cfg.base + "/v1/analytics", { headers: { "x-api-key": cfg.key } })).json()).data;
}

// watch records, until its stop function is called, the page's requests to any host
// but the server's, and the Content-Security-Policy violations its documents report
// (securitypolicyviolation events, and console errors). stop returns both lists.
async function watch(page) {
  const external = [];
  const onRequest = (r) => {
    const u = r.url();
    if (!u.startsWith(cfg.base + "/") && !u.startsWith("data:")) external.push(u);
  };
  const violations = [];
  const onConsole = (m) => {
    if (/Content Security Policy|Refused to (apply|load|execute)/i.test(m.text())) violations.push(m.text());
  };
  page.on("request", onRequest);
  page.on("console", onConsole);
  const read = () => page.evaluate(() => window.__cspViolations || []).catch(() => []);
  return async () => {
    page.off("request", onRequest);
    page.off("console", onConsole);
    return { external, violations: violations.concat(await read()) };
  };
}

// fitsPhone checks that the page needs no sideways scrolling at phone width.
async function fitsPhone(page, name) {
  await page.setViewportSize({ width: widths.phone, height: 844 });
  const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  check(`the ${name} page fits a phone's width`, scroll <= inner, `${scroll} px wide at ${inner}`);
  await page.setViewportSize({ width: widths.desktop, height: 900 });
}

// setQuery replaces the explorer's query with text, as if pasted, and closes any
// completion list.
async function setQuery(page, text) {
  await page.locator("#query-editor .cm-content").click();
  await page.keyboard.press("ControlOrMeta+A");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(text);
  await page.keyboard.press("Escape");
}

// estimate waits until the explorer's cost shows the estimate of the current query,
// and returns its figures.
async function estimate(page, text) {
  const verdict = page.locator('[data-field="estimate-verdict"]');
  await setQuery(page, text);
  await page.waitForFunction((t) => document.querySelector('[data-field="estimate-verdict"]').dataset.query === t, text);
  return {
    credits: await page.locator('[data-field="estimate-credits"]').getAttribute("data-value"),
    apis: await page.locator('[data-field="estimate-apis"]').getAttribute("data-value"),
    balance: await page.locator('[data-field="estimate-balance"]').getAttribute("data-value"),
    code: await verdict.getAttribute("data-code"),
    verdict: await verdict.textContent(),
  };
}

// explorerChecks drives the GraphQL explorer: completion from the schema, the cost
// before running (equal to the sum of the APIs' catalog costs), a run whose charge is
// what the balance lost, refusals shown before running (over the plan's APIs per
// query, over the balance), the keyboard, the schema browser; no CSP violation, no
// request elsewhere, no key in the page; axe and screenshots.
async function explorerChecks(page) {
  const stop = await watch(page);
  await page.getByRole("link", { name: "GraphQL", exact: true }).click();
  await page.waitForURL(dash + "graphql");
  await page.locator("#schema-status").filter({ hasText: "Schema loaded" }).waitFor();
  check("the explorer loads the schema", true);

  // Completion from the schema: typing "al" inside braces suggests the field alpha, and
  // Enter takes the selected option. CodeMirror ignores keys for a moment after the list
  // appears (its interactionDelay), and a busy machine may show or refill the list late:
  // each attempt types afresh, waits for a selected option and for the list to settle,
  // and the check is on the last attempt.
  const option = page.locator(".cm-tooltip-autocomplete li", { hasText: "alpha" });
  let suggested = false, typed = "";
  for (let attempt = 0; attempt < 3 && !typed.includes("{ alpha"); attempt++) {
    await page.locator("#query-editor .cm-content").click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.press("Delete");
    await page.keyboard.type("{ al");
    await option.first().waitFor({ timeout: retryAfter }).catch(() => {});
    suggested = suggested || await option.count() > 0;
    await page.locator(".cm-tooltip-autocomplete li[aria-selected=true]").first().waitFor({ timeout: retryAfter }).catch(() => {});
    await page.waitForTimeout(250);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /\{\s*alpha/.test(document.querySelector("#query-editor .cm-content")?.textContent ?? ""),
      null, { timeout: retryAfter }).catch(() => {});
    typed = (await page.locator("#query-editor .cm-content").textContent()).replace(/\s+/g, " ");
  }
  check("completion suggests a field when typing", suggested,
    await textNow(page.locator(".cm-tooltip-autocomplete"), "no list"));
  check("Enter takes the suggestion", typed.includes("{ alpha"), typed);
  await page.keyboard.press("Escape");

  // The cost before running: the sum of the catalog's costs of the APIs named.
  const catalog = (await (await fetch(cfg.base + "/v1/catalog")).json()).data.apis;
  const cost = (id) => catalog.find((a) => a.id === id).cost;
  const before = await analytics();
  const est = await estimate(page, "{ a: alpha b: alpha beta }");
  check("the cost before running is the sum of the APIs' costs, each once", est.credits === String(cost("alpha") + cost("beta")),
    `shown ${est.credits}, catalog ${cost("alpha")} + ${cost("beta")}`);
  check("the explorer counts the distinct APIs", est.apis === "2", est.apis);
  check("the explorer shows the balance", est.balance === String(before.credits.remaining), `${est.balance} vs ${before.credits.remaining}`);
  check("the query would run", !est.code && /would run this query/.test(est.verdict), est.verdict);

  // Run it: the result, the credits charged, and the balance dropped by exactly that.
  await page.getByRole("button", { name: "Run the query" }).click();
  const status = page.locator('[data-field="run-status"]');
  await status.filter({ hasText: /^Ran/ }).waitFor();
  const charged = await status.getAttribute("data-cost");
  const remaining = await status.getAttribute("data-remaining");
  const granted = await status.getAttribute("data-granted");
  const result = JSON.parse(await page.locator("#result").textContent());
  check("the run shows the data", result.data && result.data.a && result.data.a.api === "alpha" && result.data.beta.api === "beta",
    JSON.stringify(result).slice(0, 200));
  check("the run shows the credits charged, as estimated", charged === est.credits, `${charged} vs ${est.credits}`);
  const after = await analytics();
  check("the balance dropped by exactly the credits charged", before.credits.remaining - after.credits.remaining === Number(charged) &&
    String(after.credits.remaining) === remaining, `${before.credits.remaining} -> ${after.credits.remaining}, charged ${charged}, shown ${remaining}`);
  check("the run shows the part of the balance that grants hold", after.credits.granted > 0 && String(after.credits.granted) === granted &&
    (await status.textContent()).includes(`${after.credits.granted.toLocaleString("en-US")} of them granted`), `${granted} vs ${after.credits.granted}`);

  // Refused before running: over the plan's APIs per query, over the balance.
  const ceiling = await estimate(page, '{ alpha beta hash(text: "x") { hash } vault }');
  check("a query over the plan's APIs per query is shown refused before it runs",
    ceiling.code === "PLAN_LIMIT_EXCEEDED" && ceiling.apis === "4" && /allows \d+ per query/.test(ceiling.verdict), ceiling.verdict);
  const costly = await estimate(page, "{ vault }");
  check("a query over the balance is shown refused before it runs",
    costly.code === "INSUFFICIENT_CREDITS" && costly.credits === String(cost("vault")), costly.verdict);
  const file = await estimate(page, '{ imageinfo(url: "https://example.com/a.png") { width } }');
  check("a query naming a file API is shown refused before it runs", file.code === "FILE_UPLOAD_NOT_SUPPORTED", file.verdict);
  check("estimates charge nothing", (await analytics()).credits.remaining === after.credits.remaining);

  // The keyboard: Ctrl+Enter runs the query from the editor.
  await estimate(page, "{ alpha }");
  await page.keyboard.press("Control+Enter");
  await status.filter({ hasText: /charged 1 credit;/ }).waitFor();
  check("Ctrl+Enter runs the query", (await status.getAttribute("data-cost")) === "1", await status.textContent());

  // The schema browser: a type's name opens it, with its fields and descriptions.
  await page.locator("#schema-browser").getByRole("button", { name: "HashResult", exact: true }).first().click();
  const heading = page.locator("#schema-browser h3");
  check("the schema browser opens a type", (await heading.textContent()) === "HashResult" &&
    (await page.locator('#schema-browser [data-field-name="hash"]').count()) === 1, await heading.textContent());
  check("the opened type takes the focus", await heading.evaluate((h) => document.activeElement === h));
  await page.locator("#schema-browser nav").getByRole("button", { name: "Query" }).click();
  check("the trail leads back to the root type", (await heading.textContent()) === "Query");

  check("the explorer shows no key value", !(await page.content()).includes(cfg.key));
  await visit(page, "graphql");
  await fitsPhone(page, "explorer");
  const seen = await stop();
  check("the explorer breaks no Content-Security-Policy", seen.violations.length === 0, seen.violations.join("; "));
  check("the explorer requests nothing from another host", seen.external.length === 0, seen.external.join(" "));
}

// referenceChecks opens the API reference: Swagger UI draws every path of the OpenAPI
// document; no CSP violation, no request elsewhere; axe and screenshots.
async function referenceChecks(page) {
  const stop = await watch(page);
  await page.getByRole("link", { name: "API reference", exact: true }).click();
  await page.waitForURL(dash + "reference");
  await page.locator(".swagger-ui .opblock").first().waitFor();
  const doc = await (await fetch(cfg.base + "/v1/openapi.json")).json();
  const shown = await page.locator(".swagger-ui .opblock-summary-path").evaluateAll((els) => els.map((e) => e.getAttribute("data-path")));
  const missing = Object.keys(doc.paths).filter((p) => !shown.includes(p));
  check("the reference shows every path of the OpenAPI document", missing.length === 0 && shown.includes("/v1/alpha"),
    `missing ${missing.join(" ")}; shown ${shown.join(" ")}`);
  check("the reference warns of nothing", (await page.locator(".swagger-ui .errors-wrapper").count()) === 0,
    await textNow(page.locator(".swagger-ui .errors-wrapper"), ""));
  check("the reference offers no try-it-out", (await page.locator(".swagger-ui .try-out").count()) === 0);
  await page.locator(".swagger-ui .opblock-summary-path", { hasText: "/v1/hash" }).first().click();
  await page.locator(".swagger-ui .opblock.is-open .parameters").first().waitFor();
  check("an operation opens with its parameters", (await page.locator(".swagger-ui .opblock.is-open").textContent()).includes("text"));
  await visit(page, "reference");
  await fitsPhone(page, "reference");
  const seen = await stop();
  check("the reference breaks no Content-Security-Policy", seen.violations.length === 0, seen.violations.join("; "));
  check("the reference requests nothing from another host", seen.external.length === 0, seen.external.join(" "));
}

// deliveryOf returns the state and attempts of the delivery of message msg on the
// endpoint's page, reloading the page until done says they are what it waits for (or
// patience runs out).
async function deliveryOf(page, msg, done) {
  const deadline = Date.now() + patience;
  for (;;) {
    const row = page.locator(`tr[data-message="${msg}"]`);
    const got = (await row.count()) === 0 ? { state: "absent", attempts: "" } : {
      state: await row.getAttribute("data-state"),
      attempts: await row.locator('[data-field="attempts"]').textContent(),
      status: await textNow(row.locator('[data-field="last-status"]'), ""),
    };
    if (done(got) || Date.now() > deadline) return got;
    await page.waitForTimeout(200);
    await page.reload();
  }
}

// webhookChecks drives the Webhooks page: add an endpoint at the test's receiver with
// two event types, its secret shown once (and copied); the list shows it with the
// secret masked; a test event's delivery is listed, then delivered (answered 204), and
// resent; disabling takes the test away until the endpoint is enabled again; rotating
// shows a new secret once; deleting asks first. No later page shows a secret.
async function webhookChecks(page) {
  await page.getByRole("link", { name: "Webhooks", exact: true }).click();
  await page.waitForURL(dash + "webhooks");
  check("the Webhooks page says there is no endpoint yet", (await page.locator('[data-field="no-endpoints"]').count()) === 1);
  await visit(page, "webhooks-empty");

  await page.getByLabel("URL", { exact: true }).fill(cfg.hook);
  await page.getByRole("checkbox", { name: "key.created", exact: true }).check();
  await page.getByRole("checkbox", { name: "credits.low", exact: true }).check();
  await page.getByRole("button", { name: "Add the endpoint" }).click();
  await page.locator("#webhook-secret").waitFor();
  const secret = await page.locator("#webhook-secret").inputValue();
  check("the new endpoint's secret is shown", /^whsec_[A-Za-z0-9+/]{40,}=*$/.test(secret), secret.slice(0, 6));
  const copy = page.getByRole("button", { name: "Copy" });
  await copy.waitFor({ state: "visible" }).catch(() => {});
  await copy.click();
  await page.locator("[data-copy-status]").filter({ hasText: /./ }).waitFor();
  check("the copy button copies the secret", (await page.evaluate(() => navigator.clipboard.readText())) === secret);
  await visit(page, "webhook-created");

  await page.getByRole("link", { name: "Back to the webhooks" }).click();
  await page.waitForURL(dash + "webhooks");
  const row = page.locator("tr[data-endpoint-id]");
  check("the list shows the endpoint", (await row.count()) === 1 && (await row.locator('[data-field="url"]').textContent()) === cfg.hook,
    await textNow(row, "no row"));
  const events = await row.locator('[data-field="events"]').textContent();
  check("the list shows its events", events.includes("key.created") && events.includes("credits.low"), events);
  check("the list shows it enabled", (await row.locator('[data-field="state"]').textContent()) === "enabled");
  const masked = await row.locator('[data-field="secret"]').textContent();
  check("the list shows the secret masked", masked === secret.slice(0, "whsec_".length + 4) + "…", masked);
  check("the list shows no secret", !(await page.content()).includes(secret));
  await visit(page, "webhooks");
  await fitsPhone(page, "webhooks");

  await row.getByRole("link", { name: /Manage/ }).click();
  await page.waitForURL(/\/dashboard\/webhook\?id=ep_/);
  const id = new URL(page.url()).searchParams.get("id");
  emit({ event: "endpoint", id });

  // A test event: listed at once, then delivered to the receiver.
  await page.getByRole("button", { name: "Send a test event" }).click();
  await page.waitForURL(/done=test/);
  check("the page says the test event is queued", (await page.getByRole("status").textContent()).includes("test event"));
  const delivery = page.locator('tr[data-type="endpoint.test"]');
  check("the test event's delivery is listed", (await delivery.count()) === 1, await textNow(page.locator("table.deliveries"), "no table"));
  const msg = await delivery.first().getAttribute("data-message");
  check("the delivery shows its message id", /^msg_[a-z0-9]{26}$/.test(msg) &&
    (await delivery.first().locator('[data-field="message-id"]').textContent()) === msg, msg);
  let got = await deliveryOf(page, msg, (d) => d.state === "delivered");
  check("the test event is delivered", got.state === "delivered" && got.attempts === "1" && got.status === "204", JSON.stringify(got));
  await visit(page, "webhook");
  await fitsPhone(page, "webhook");

  // Resent: delivered again, a second attempt.
  await page.locator(`tr[data-message="${msg}"]`).getByRole("button", { name: /Resend/ }).click();
  await page.waitForURL(/done=resend/);
  got = await deliveryOf(page, msg, (d) => d.state === "delivered" && d.attempts === "2");
  check("the resent delivery is delivered again", got.state === "delivered" && got.attempts === "2", JSON.stringify(got));

  // Disabled: no test until it is enabled again.
  await page.getByRole("button", { name: "Disable", exact: true }).click();
  await page.waitForURL(/done=disable/);
  check("the endpoint is disabled", (await page.locator('[data-field="state"]').textContent()) === "disabled" &&
    (await page.getByRole("button", { name: "Send a test event" }).count()) === 0);
  await visit(page, "webhook-disabled");
  await page.getByRole("button", { name: "Enable", exact: true }).click();
  await page.waitForURL(/done=enable/);
  check("the endpoint is enabled again", (await page.locator('[data-field="state"]').textContent()) === "enabled");

  // Rotated: a new secret, shown once.
  await page.getByRole("button", { name: "Rotate the secret" }).click();
  await page.locator("#webhook-secret").waitFor();
  const rotated = await page.locator("#webhook-secret").inputValue();
  check("the rotated secret is shown, new", /^whsec_/.test(rotated) && rotated !== secret);
  await visit(page, "webhook-rotated");
  await page.goto(dash + "webhook?id=" + id);
  const html = await page.content();
  check("the endpoint's page shows no secret", !html.includes(secret) && !html.includes(rotated));

  // Deleted, after a confirmation.
  await page.getByRole("link", { name: /^Delete/ }).click();
  await page.waitForURL(/\/dashboard\/webhook-delete\?id=/);
  await visit(page, "webhook-delete");
  await page.getByRole("button", { name: "Delete the endpoint" }).click();
  await page.waitForURL(/\/dashboard\/webhooks\?deleted=1/);
  check("the endpoint is deleted", (await page.locator("tr[data-endpoint-id]").count()) === 0 &&
    (await page.getByRole("status").textContent()).includes("deleted"));
}

// newContext opens a browser context whose waits last patience.
async function newContext(browser) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(patience);
  context.setDefaultNavigationTimeout(patience);
  return context;
}

async function main() {
  const browser = await chromium.launch({
    executablePath: cfg.chromium,
    timeout: patience,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--no-first-run"],
  });
  try {
    const context = await newContext(browser);
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: cfg.base });
    const page = await context.newPage();
    await page.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (e) => {
        (window.__cspViolations = window.__cspViolations || []).push(`${e.violatedDirective} ${e.blockedURI}`);
      });
    });
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
    });

    // Sign in.
    await page.goto(dash);
    check("signed out, the dashboard sends to the sign-in page", page.url().endsWith("/dashboard/sign-in"), page.url());
    await visit(page, "sign-in");
    await page.getByLabel("API key").fill("not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    check("a bad key is refused with a message", (await page.getByRole("alert").textContent()).includes("not an API key"));
    await page.getByLabel("API key").fill(cfg.key);
    await page.keyboard.press("Enter"); // the form works from the keyboard
    await page.waitForURL(dash);
    check("sign in with a key", page.url() === dash && !page.url().includes(cfg.key), page.url());

    // The overview's figures are those of GET /v1/analytics.
    const analytics = (await (await fetch(cfg.base + "/v1/analytics", { headers: { "x-api-key": cfg.key } })).json()).data;
    const series = (await (await fetch(cfg.base + "/v1/analytics?interval=day&from=" +
      encodeURIComponent(await page.locator("svg.chart title").first().textContent().then((t) => t.match(/from (\S+)/)[1])),
    { headers: { "x-api-key": cfg.key } })).json()).data;
    let calls = 0, credits = 0;
    for (const s of series.series) for (const p of s.points) { calls += p.calls; credits += p.credits; }
    const want = {
      plan: analytics.plan,
      "credits-used": String(analytics.credits.used),
      "credits-remaining": String(analytics.credits.remaining),
      "credits-granted": String(analytics.credits.granted),
      "credits-limit": String(analytics.credits.limit),
      renewal: new Date(analytics.credits.renewal).toISOString().replace(".000Z", "Z"),
      "rate-limit": String(analytics.rate_limit ? analytics.rate_limit.per_minute : 0),
      concurrency: String(analytics.concurrency.limit),
      "calls-30d": String(calls),
      "credits-30d": String(credits),
    };
    for (const [name, value] of Object.entries(want)) {
      const got = name === "plan" ? await page.locator('[data-field="plan"]').textContent() : await field(page, name);
      check(`overview ${name} equals /v1/analytics`, got === value, `page ${got}, API ${value}`);
    }
    check("the overview counts calls", calls > 0, calls);
    await visit(page, "overview");

    // Create a sub-key limited to one API.
    await page.getByRole("link", { name: "Keys", exact: true }).click();
    await page.waitForURL(dash + "keys");
    await visit(page, "keys");
    await page.getByLabel("Name", { exact: true }).fill("alpha only");
    await page.getByRole("checkbox", { name: "alpha", exact: true }).check();
    await page.getByRole("checkbox", { name: "rest", exact: true }).check();
    await page.getByRole("button", { name: "Create the key" }).click();
    await page.locator("#key-value").waitFor();
    const value = await page.locator("#key-value").inputValue();
    check("the new key's value is shown", /^[0-9a-f-]{36}$/.test(value), "");
    const copy = page.getByRole("button", { name: "Copy" });
    // The button is added by the page's script once it has run.
    await copy.waitFor({ state: "visible" }).catch(() => {});
    check("the copy button appears with the script", await copy.isVisible());
    await copy.click();
    await page.locator("[data-copy-status]").filter({ hasText: /./ }).waitFor();
    const clip = await page.evaluate(() => navigator.clipboard.readText());
    check("the copy button copies the value", clip === value, "");
    await visit(page, "key-created");
    check("the sub-key calls its API over REST", (await rest("alpha", value)) === 200);
    const other = await rest("beta", value);
    check("the sub-key is refused another API", other === 403, other);
    await page.goto(dash + "keys");
    check("the keys page does not show the value", !(await page.content()).includes(value));
    const row = page.locator("tr", { hasText: "alpha only" });
    check("the keys table lists the restrictions", (await row.textContent()).includes("APIs: alpha"), await row.textContent());
    const keyID = await row.getAttribute("data-key-id");
    emit({ event: "created", id: keyID });

    // Rotate, with a confirmation; the old value is refused by the next call.
    await row.getByRole("link", { name: /Rotate/ }).click();
    await page.waitForURL(/\/dashboard\/rotate\?key=/);
    await visit(page, "rotate");
    await page.getByRole("button", { name: "Rotate the key" }).click();
    await page.locator("#key-value").waitFor();
    const rotated = await page.locator("#key-value").inputValue();
    check("the rotated value is shown, new", /^[0-9a-f-]{36}$/.test(rotated) && rotated !== value);
    await visit(page, "key-rotated");
    const old = await rest("alpha", value);
    check("the old value is refused after the rotation", old === 401, old);
    check("the new value works", (await rest("alpha", rotated)) === 200);

    // Revoke, with a confirmation.
    await page.goto(dash + "keys");
    await page.locator("tr", { hasText: "alpha only" }).getByRole("link", { name: /Revoke/ }).click();
    await page.waitForURL(/\/dashboard\/revoke\?key=/);
    await visit(page, "revoke");
    await page.getByRole("button", { name: "Revoke the key" }).click();
    await page.waitForURL(/\/dashboard\/keys\?revoked=/);
    check("the keys page says the key is revoked", (await page.getByRole("status").textContent()).includes("revoked"));
    const state = await page.locator("tr", { hasText: "alpha only" }).locator('[data-field="state"]').textContent();
    check("the table shows the key revoked", state === "revoked", state);
    const after = await rest("alpha", rotated);
    check("the revoked key is refused", after === 403, after);
    const html = await page.content();
    check("no later page shows a value", !html.includes(value) && !html.includes(rotated) && !html.includes(cfg.key));

    // A cross-site form post, without the CSRF token, is refused.
    await page.goto(cfg.evil + "/");
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url().startsWith(dash)),
      page.getByRole("button", { name: "Win a prize" }).click(),
    ]);
    check("a cross-site form post is refused", res.status() === 403, res.status());
    // Same origin, with the cookie but without the token: refused too.
    await page.goto(dash + "keys");
    const status = await page.evaluate(async (id) => {
      const r = await fetch("rotate", { method: "POST", body: new URLSearchParams({ key_id: id }) });
      return r.status;
    }, keyID);
    check("a same-origin post without the CSRF token is refused", status === 403, status);

    await webhookChecks(page);

    // Usage: REST calls, then the table's totals (and the CSV's) equal GET
    // /v1/analytics?interval=day for the same range.
    for (const api of ["alpha", "beta", "beta"]) {
      check(`REST call ${api} before the usage page`, (await rest(api, cfg.key)) === 200);
    }
    const flushed = await fetch(cfg.flush, { method: "POST" });
    check("usage flushed", flushed.status === 204, flushed.status);
    await page.getByRole("link", { name: "Usage", exact: true }).click();
    await page.waitForURL(dash + "usage");
    const from = await page.getByLabel("From (UTC)").inputValue();
    const to = await page.getByLabel("To, included (UTC)").inputValue();
    const toExcl = new Date(Date.parse(to + "T00:00:00Z") + 86400000).toISOString().slice(0, 10);
    const ranged = (await (await fetch(cfg.base + `/v1/analytics?interval=day&by=api&from=${from}&to=${toExcl}`,
      { headers: { "x-api-key": cfg.key } })).json()).data;
    const sums = { calls: 0, credits: 0, errors: 0 };
    for (const s of ranged.series) for (const p of s.points) {
      sums.calls += p.calls; sums.credits += p.credits;
      for (const n of Object.values(p.errors || {})) sums.errors += n;
    }
    for (const f of ["calls", "credits", "errors"]) {
      const got = await field(page, "total-" + f);
      check(`usage total ${f} equals /v1/analytics`, got === String(sums[f]), `page ${got}, API ${sums[f]}`);
    }
    check("the usage table counts the calls", sums.calls >= 6, sums.calls);
    check("the usage page draws three charts", (await page.locator("svg.chart").count()) === 3);
    await visit(page, "usage");
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("link", { name: "Download as CSV" }).click(),
    ]);
    const csvText = readFileSync(await download.path(), "utf8");
    const lines = csvText.trim().split("\n").slice(1).map((l) => l.split(","));
    const csvCalls = lines.reduce((n, l) => n + Number(l[3]), 0);
    const csvCredits = lines.reduce((n, l) => n + Number(l[4]), 0);
    check("the CSV's totals equal /v1/analytics", csvCalls === sums.calls && csvCredits === sums.credits,
      `csv ${csvCalls}/${csvCredits}, API ${sums.calls}/${sums.credits}`);
    check("the CSV holds no key value", !csvText.includes(cfg.key) && !csvText.includes(value) && !csvText.includes(rotated));
    await page.getByLabel("Group by", { exact: true }).selectOption("key");
    await page.getByLabel("Interval", { exact: true }).selectOption("hour");
    await page.getByLabel("From (UTC)").fill(to);
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL(/usage\?.*by=key/);
    check("usage by key and hour", (await field(page, "total-calls")) !== null && !(await page.content()).includes(cfg.key));
    await visit(page, "usage-by-key");

    // The audit log: the sub-key's creation, rotation and revocation, newest first.
    await page.getByRole("link", { name: "Audit log", exact: true }).click();
    await page.waitForURL(dash + "audit");
    const actions = await page.locator("tr[data-action]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-action")));
    check("the audit log lists the key's changes, newest first",
      actions.indexOf("key.revoke") >= 0 && actions.indexOf("key.revoke") < actions.indexOf("key.rotate") &&
      actions.indexOf("key.rotate") < actions.indexOf("key.create"), actions.join(" "));
    check("the audit log shows no key value", !(await page.content()).includes(cfg.key) && !(await page.content()).includes(rotated));
    await visit(page, "audit");

    // The MCP page: the URL of this server's endpoint, snippets with a placeholder.
    await page.getByRole("link", { name: "MCP", exact: true }).click();
    await page.waitForURL(dash + "mcp");
    const mcpURL = await page.getByLabel("MCP server URL (Streamable HTTP)").inputValue();
    check("the MCP page gives the endpoint's URL", mcpURL === cfg.base + "/v1/mcp", mcpURL);
    const cursorCfg = JSON.parse(await page.locator("#cursor-key").inputValue());
    check("the Cursor snippet has the URL and a key placeholder",
      cursorCfg.mcpServers.tollgate.url === mcpURL && cursorCfg.mcpServers.tollgate.headers["x-api-key"] === "YOUR_API_KEY");
    check("the MCP page shows no key value", !(await page.content()).includes(cfg.key));
    await page.locator('button[data-copy="vscode-key"]').click();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    check("a snippet's copy button copies it", JSON.parse(copied).servers.tollgate.url === mcpURL, copied.slice(0, 80));
    await visit(page, "mcp");

    await explorerChecks(page);
    await referenceChecks(page);
    await apisChecks(page, browser);

    // Sign out.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/sign-in\?signed_out=1/);
    check("sign out", (await page.getByRole("status").textContent()).includes("signed out"));
    await page.goto(dash);
    check("after signing out the overview asks to sign in", page.url().endsWith("/dashboard/sign-in"), page.url());
    check("no Content-Security-Policy violation", cspErrors.length === 0, cspErrors.join("; "));
  } finally {
    await browser.close();
  }
}

// apisChecks drives the APIs page: the catalog, an API's page, a snippet's copy
// button, the try-it form with a valid input (its cost equals the balance's drop read
// from GET /v1/account) and an invalid one (a 400 naming the parameter, not charged),
// and the catalog seen by a key limited to one API.
async function apisChecks(page, browser) {
  await page.getByRole("link", { name: "APIs", exact: true }).click();
  await page.waitForURL(dash + "apis");
  const rows = await page.locator("tr[data-api]").count();
  check("the APIs page lists the catalog", rows >= 8, rows);
  check("the primary key may call every API", (await page.locator('tr[data-usable="true"]').count()) === rows);
  await visit(page, "apis");

  await page.getByRole("link", { name: "Hash", exact: true }).click();
  await page.waitForURL(dash + "api?id=hash");
  check("the API page gives the method and path", (await page.locator('[data-field="rest"]').textContent()) === "GET /v1/hash");
  await page.locator('button[data-copy="snippet-curl"]').click();
  const curl = await page.evaluate(() => navigator.clipboard.readText());
  check("the curl snippet is copied", curl.includes(cfg.base + "/v1/hash?") && curl.includes("$TOLLGATE_API_KEY") && !curl.includes(cfg.key), curl);
  await page.locator('details[data-language="snippet-python"] summary').click();
  await page.locator('button[data-copy="snippet-python"]').click();
  const py = await page.evaluate(() => navigator.clipboard.readText());
  check("a package's example is copied", py.includes('os.environ["TOLLGATE_API_KEY"]') && py.includes("HashClient"), py.slice(0, 80));
  await visit(page, "api");

  // A valid call: the cost shown is the balance's drop.
  const before = await balance(cfg.key);
  await page.getByLabel("text (required)", { exact: true }).fill("hello");
  await page.getByLabel("algorithm", { exact: true }).selectOption("md5");
  await page.getByRole("button", { name: "Call hash" }).click();
  await page.locator('[data-field="envelope"]').waitFor();
  const after = await balance(cfg.key);
  const cost = Number(await field(page, "try-cost"));
  const envelope = JSON.parse(await page.locator('[data-field="envelope"]').textContent());
  check("try-it shows the envelope", envelope.status === "ok" && envelope.data.hash === "5d41402abc4b2a76b9719d911017c592", JSON.stringify(envelope));
  check("try-it's cost equals the balance's drop", cost === 1 && before - after === cost, `cost ${cost}, ${before} -> ${after}`);
  check("try-it's remaining equals GET /v1/account", Number(await field(page, "try-remaining")) === after);
  const granted = (await account(cfg.key)).balance.granted;
  check("try-it's granted part equals GET /v1/account's", granted > 0 && Number(await field(page, "try-granted")) === granted,
    `${await field(page, "try-granted")} vs ${granted}`);
  check("try-it keeps the values", (await page.getByLabel("algorithm", { exact: true }).inputValue()) === "md5");
  await visit(page, "api-result");

  // An invalid call: a 400 naming the parameter, not charged.
  await page.getByLabel("text (required)", { exact: true }).fill("");
  await page.getByRole("button", { name: "Call hash" }).click();
  await page.locator('[data-field="try-status"][data-value="400"]').waitFor();
  const refused = JSON.parse(await page.locator('[data-field="envelope"]').textContent());
  check("an invalid try is a 400 naming the parameter", refused.status === "error" && refused.error.includes('"text"'), refused.error);
  check("an invalid try costs nothing", (await balance(cfg.key)) === after && (await field(page, "try-cost")) === "0");
  await visit(page, "api-refused");

  // A file API's page.
  await page.goto(dash + "api?id=image-info");
  check("a file API's try-it form takes an upload", (await page.locator('input[type="file"]').count()) === 1);
  await visit(page, "api-file");

  // A key limited to one API sees the others marked unusable.
  const context = await newContext(browser);
  const other = await context.newPage();
  other.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
  });
  await other.goto(dash + "sign-in");
  await other.getByLabel("API key").fill(cfg.scoped);
  await other.getByRole("button", { name: "Sign in" }).click();
  await other.waitForURL(dash);
  await other.goto(dash + "apis");
  const usable = await other.locator('tr[data-usable="true"]').evaluateAll((rs) => rs.map((r) => r.getAttribute("data-api")));
  const unusable = await other.locator('tr[data-usable="false"]').count();
  check("a scoped key may call only its API", usable.length === 1 && usable[0] === "hash" && unusable === rows - 1, usable.join(" "));
  check("a scoped key is told why not", (await other.locator('tr[data-api="echo"]').textContent()).includes("limited to hash"));
  await visit(other, "apis-scoped");
  await context.close();
}

main().then(() => process.exit(0), (err) => {
  process.stderr.write(String(err && err.stack || err) + "\n");
  process.exit(1);
});
