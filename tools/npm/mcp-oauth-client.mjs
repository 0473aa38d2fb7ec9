// Drives Tollgate's MCP endpoint through its OAuth flow with the official TypeScript
// SDK: an OAuthClientProvider that plays the browser (it opens the consent page and
// approves it with an API key, as a user would), then calls on the authorized
// connection. Used by examples/server's tests:
//
//   node mcp-oauth-client.mjs <endpoint-url> <api-key>
//
// It prints one JSON line per check ({"check", "ok", "detail"}), then
// {"event":"ready"} and reads commands from stdin, one per line: "call" calls hash
// and reports it as check "call-<n>"; "quit" (or the end of stdin) closes the client.
// Every request waits up to five minutes for its answer (the SDK's own default is a
// minute): a busy machine may be slow, and a test must not fail for it.
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const [url, key] = process.argv.slice(2);
const report = (check, ok, detail = '') => console.log(JSON.stringify({ check, ok: !!ok, detail: String(detail) }));
const opts = { timeout: 5 * 60_000 }; // milliseconds

// approve plays the user's browser: it opens the consent page at authUrl, fills in the
// API key, submits the form, and returns the code of the redirect.
async function approve(authUrl) {
  const page = await fetch(authUrl, { redirect: 'manual' });
  const html = await page.text();
  if (page.status !== 200) throw new Error(`consent page: ${page.status} ${html.slice(0, 300)}`);
  const form = html.match(/<form\b[^>]*>/i)?.[0];
  if (!form) throw new Error(`no form on the consent page: ${html.slice(0, 300)}`);
  const attr = (tag, name) => tag.match(new RegExp(`\\b${name}\\s*=\\s*"([^"]*)"`, 'i'))?.[1] ?? tag.match(new RegExp(`\\b${name}\\s*=\\s*'([^']*)'`, 'i'))?.[1];
  const unescape = (s) => s?.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');
  const fields = new URLSearchParams();
  let keyField = false;
  for (const input of html.match(/<input\b[^>]*>/gi) ?? []) {
    const name = unescape(attr(input, 'name'));
    if (!name) continue;
    const type = (attr(input, 'type') ?? 'text').toLowerCase();
    if ((type === 'password' || type === 'text') && /key/i.test(name)) {
      fields.set(name, key);
      keyField = true;
    } else if (type !== 'submit' && type !== 'button') {
      fields.set(name, unescape(attr(input, 'value')) ?? '');
    }
  }
  // The approving button, if it carries a value.
  for (const button of [...(html.match(/<button\b[^>]*>/gi) ?? []), ...(html.match(/<input\b[^>]*type\s*=\s*["']submit["'][^>]*>/gi) ?? [])]) {
    const name = unescape(attr(button, 'name'));
    const value = unescape(attr(button, 'value'));
    if (name && value && !/deny|cancel|reject/i.test(value)) {
      fields.set(name, value);
      break;
    }
  }
  if (!keyField) throw new Error(`no API key field on the consent page: ${html.slice(0, 500)}`);
  const action = new URL(unescape(attr(form, 'action')) || authUrl.toString(), authUrl);
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  const cookie = page.headers.getSetCookie?.().map((c) => c.split(';')[0]).join('; ');
  if (cookie) headers.cookie = cookie;
  const res = await fetch(action, { method: 'POST', body: fields, headers, redirect: 'manual' });
  const location = res.headers.get('location');
  if (res.status < 300 || res.status > 399 || !location) {
    throw new Error(`consent: ${res.status} ${(await res.text()).slice(0, 300)}`);
  }
  const code = new URL(location).searchParams.get('code');
  if (!code) throw new Error(`the redirect carries no code: ${location}`);
  return code;
}

class BrowserlessProvider {
  constructor() {
    this.code = undefined;
  }
  get redirectUrl() {
    return 'http://127.0.0.1:9/oauth/callback'; // never contacted: approve() reads the redirect
  }
  get clientMetadata() {
    return {
      client_name: 'Tollgate OAuth check',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  async redirectToAuthorization(authUrl) { this.code = await approve(authUrl); }
}

const provider = new BrowserlessProvider();
let client;
try {
  // The first connection meets the 401 and runs the flow up to the code.
  let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  client = new Client({ name: 'tollgate-oauth-check', version: '1.0.0' });
  try {
    await client.connect(transport, opts);
    report('challenged', false, 'connected without authorization');
  } catch (e) {
    report('challenged', e instanceof UnauthorizedError && provider.code, e);
  }
  await transport.finishAuth(provider.code);
  report('token', provider.tokens()?.access_token && !/^[0-9a-f-]{36}$/i.test(provider.tokens().access_token), provider.tokens()?.token_type);

  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  client = new Client({ name: 'tollgate-oauth-check', version: '1.0.0' });
  await client.connect(transport, opts);
  const { tools } = await client.listTools(undefined, opts);
  report('list-tools', tools.length > 0, `${tools.length} tools`);
} catch (e) {
  report('unexpected-error', false, e?.stack ?? e);
  process.exit(1);
}

console.log(JSON.stringify({ event: 'ready' }));
let n = 0;
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line.trim() === 'quit') break;
  if (line.trim() !== 'call') continue;
  n++;
  try {
    const res = await client.callTool({ name: 'hash', arguments: { text: 'hello' } }, undefined, opts);
    report(`call-${n}`, !res.isError && res.structuredContent?.hash?.length === 64, JSON.stringify(res.content));
  } catch (e) {
    report(`call-${n}`, false, e?.message ?? e);
  }
}
await client.close().catch(() => {});
process.exit(0);
