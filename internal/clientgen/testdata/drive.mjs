// Runs calls of generated JavaScript packages for the Go tests, and prints what each
// returned or threw as one JSON array on standard output.
//
//   node drive.mjs cases.json
//
// cases.json is a list of {name, module, class, options, method, args, callback}: the
// test constructs new module[class](options) and calls method(...args), with a callback
// as last argument when callback is true.
import { readFile } from 'node:fs/promises';

function describeError(e) {
  return {
    class: e?.constructor?.name ?? typeof e,
    isError: e instanceof Error,
    message: e?.message ?? null,
    status: e?.status ?? null,
    error: e?.error ?? null,
    data: e?.data === undefined ? 'undefined' : e.data,
    param: e?.param ?? null,
    httpStatus: e?.httpStatus ?? null,
    code: e?.code ?? null,
    retryAfter: e?.rateLimit?.retryAfter ?? null,
    index: e?.index ?? null,
  };
}

let unhandled = 0;
process.on('unhandledRejection', () => {
  unhandled++;
});

const cases = JSON.parse(await readFile(process.argv[2], 'utf8'));
const results = [];
for (const c of cases) {
  const mod = await import(c.module);
  let client;
  try {
    client = new mod[c.class](c.options);
  } catch (e) {
    results.push({ name: c.name, ok: false, stage: 'constructor', error: describeError(e) });
    continue;
  }
  try {
    let response;
    if (c.callback) {
      response = await new Promise((resolve, reject) => {
        const returned = client[c.method](...c.args, (err, res) => (err ? reject(err) : resolve(res)));
        if (returned !== undefined) reject(new Error('the callback form returned a value'));
      });
    } else {
      response = await client[c.method](...c.args);
    }
    results.push({ name: c.name, ok: true, response });
  } catch (e) {
    results.push({ name: c.name, ok: false, stage: 'call', error: describeError(e) });
  }
}
await new Promise((resolve) => setImmediate(resolve));
process.stdout.write(JSON.stringify({ results, unhandled }));
