// Runs the graphql-http audit suite (the GraphQL-over-HTTP conformance audits) against a
// live server, sending an API key with every request, and prints one JSON line per
// audit: {"id", "name", "status", "reason"}. Used by the gql package's tests:
//
//   node graphql-audit.mjs http://127.0.0.1:8080/v1/graphql <api-key>
import { auditServer } from 'graphql-http';

const [url, key] = process.argv.slice(2);
const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  if (key) headers.set('x-api-key', key);
  return fetch(input, { ...init, headers });
};
const results = await auditServer({ url, fetchFn });
for (const r of results) {
  console.log(JSON.stringify({ id: r.id, name: r.name, status: r.status, reason: r.reason ?? '' }));
}
