// Drives Tollgate's MCP endpoint with the official TypeScript SDK client and prints one
// JSON line per check: {"check", "ok", "detail"}. Used by the mcp package's tests:
//
//   node mcp-client.mjs <endpoint-url> <api-key>
//
// After its checks it prints {"event":"listening"} and waits (up to five minutes: a busy
// machine may be slow, and the wait ends when the notification comes) for a
// notifications/tools/list_changed, which the Go test triggers by adding an API to the
// catalog; it then lists the tools again and reports the new one. Every request waits
// as long for its answer (the SDK's own default is a minute).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const [url, key] = process.argv.slice(2);
const report = (check, ok, detail = '') => console.log(JSON.stringify({ check, ok: !!ok, detail: String(detail) }));
// patience is how long, in milliseconds, a request or the wait for the notification lasts.
const patience = 5 * 60_000;
const opts = { timeout: patience };

async function connect(headers) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'tollgate-ts-check', version: '1.0.0' });
  await client.connect(transport, opts);
  return { client, transport };
}

try {
  // Without a credential the connection is refused.
  try {
    const { client } = await connect({});
    report('no-credential-refused', false, 'connected without a credential');
    await client.close();
  } catch (e) {
    report('no-credential-refused', /-32041|401|no credential/.test(String(e)), e);
  }

  const { client } = await connect({ 'x-api-key': key });
  report('connect', true, client.getServerVersion()?.name);

  let changed = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => { changed++; });

  const { tools } = await client.listTools(undefined, opts);
  report('list-tools', tools.length > 0, `${tools.length} tools: ${tools.map((t) => t.name).join(' ')}`);
  const hash = tools.find((t) => t.name === 'hash');
  report('hash-described', hash && /Costs 1 credit per call/.test(hash.description) && hash.inputSchema?.properties?.text && hash.outputSchema,
    JSON.stringify(hash));

  // The SDK validates structuredContent against the tool's output schema.
  const res = await client.callTool({ name: 'hash', arguments: { text: 'hello' } }, undefined, opts);
  const want = '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824';
  report('call-hash', !res.isError && res.structuredContent?.hash === want && JSON.parse(res.content[0].text).hash === want,
    JSON.stringify(res));

  const date = await client.callTool({ name: 'date-info', arguments: { date: '2024-02-29' } }, undefined, opts);
  report('call-date-info', !date.isError && date.structuredContent?.['day-of-week'] === 'Thursday', JSON.stringify(date));

  const bad = await client.callTool({ name: 'hash', arguments: {} }, undefined, opts);
  report('bad-arguments-is-error', bad.isError && /^invalid_input: /.test(bad.content[0].text), JSON.stringify(bad));

  try {
    await client.callTool({ name: 'no-such-tool', arguments: {} }, undefined, opts);
    report('unknown-tool-error', false, 'no error');
  } catch (e) {
    report('unknown-tool-error', e instanceof McpError && e.code === -32602, `${e.code} ${e.message}`);
  }

  // A catalog change reaches the client.
  console.log(JSON.stringify({ event: 'listening' }));
  const deadline = Date.now() + patience;
  while (changed === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const after = await client.listTools(undefined, opts);
  report('list-changed', changed > 0 && after.tools.some((t) => t.name === 'ping'), `${changed} notifications; ${after.tools.length} tools`);

  await client.close();
} catch (e) {
  report('unexpected-error', false, e?.stack ?? e);
  process.exitCode = 1;
}
