package main

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The hostile-input suite's requests: a fixed corpus, the corpus written as raw bytes,
// and a generator of seeded random requests.

// mcpInit is the initialize request of an MCP session.
const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}`

// Sizes of the corpus.
var (
	big    = strings.Repeat("x", 900<<10) // a 900 KB string
	deep   = strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deepGQ = "{" + strings.Repeat("a{", 10000) + "__typename" + strings.Repeat("}", 10001)
	// deepGQWithin is as deep as a query can be within the 16 KiB a query may have.
	deepGQWithin = "{" + strings.Repeat("a{", 5000) + "b" + strings.Repeat("}", 5001)
)

// header returns a header of name/value pairs.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// call returns a REST attack with a key; a body is sent as application/json unless
// kv says otherwise.
func call(name, method, target, key string, body string, kv ...string) *attack {
	a := &attack{name: "rest: " + name, method: method, target: target, header: header(kv...)}
	if key != "" {
		a.header.Set("X-Api-Key", key)
	}
	if body != "" {
		a.body = []byte(body)
		if a.header.Get("Content-Type") == "" {
			a.header.Set("Content-Type", "application/json")
		}
	}
	return a
}

// graphQL returns a GraphQL attack: the query and variables in a JSON body.
func graphQL(name, key, query string, vars any) *attack {
	body := map[string]any{"query": query}
	if vars != nil {
		body["variables"] = vars
	}
	b, _ := json.Marshal(body)
	return graphQLBody(name, key, string(b))
}

// graphQLBody returns a GraphQL attack with the body as given.
func graphQLBody(name, key, body string) *attack {
	a := call(name, http.MethodPost, "/v1/graphql", key, body)
	a.name = "graphql: " + name
	return a
}

// mcpCall returns an MCP attack: a POST of body with beta's key, in the session.
func mcpCall(name, body string, kv ...string) *attack {
	a := &attack{name: "mcp: " + name, method: http.MethodPost, target: "/v1/mcp", body: []byte(body), session: true,
		header: header(append([]string{"X-Api-Key", keyBeta, "Content-Type", "application/json",
			"Accept", "application/json, text/event-stream"}, kv...)...)}
	return a
}

// toolCall is the body of a tools/call.
func toolCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// adminCall returns an admin attack with the admin token.
func adminCall(name, method, target, body string) *attack {
	a := call(name, method, target, "", body, "Authorization", "Bearer "+testAdminToken)
	a.name = "admin: " + name
	return a
}

// oauthCall returns an attack on the authorization server.
func oauthCall(name, method, target, contentType, body string) *attack {
	a := call(name, method, target, "", body)
	a.name = "oauth: " + name
	if contentType != "" {
		a.header.Set("Content-Type", contentType)
	}
	return a
}

// aliases returns n aliased copies of a field.
func aliases(n int, field string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(" a" + strconv.Itoa(i) + ": " + field)
	}
	return b.String()
}

// exponential returns fragments F0..Fn, each spreading the one before twice: { ...Fn }
// expands to 2^n copies of the field.
func exponential(n int, field string) string {
	var b strings.Builder
	b.WriteString("fragment F0 on Query { " + field + " }\n")
	for i := 1; i <= n; i++ {
		b.WriteString("fragment F" + strconv.Itoa(i) + " on Query { ...F" + strconv.Itoa(i-1) + " ...F" + strconv.Itoa(i-1) + " }\n")
	}
	return b.String() + "{ ...F" + strconv.Itoa(n) + " }"
}

// tenEchoes are ten aliases of echo, each with its own message and 5 s of delay.
var tenEchoes = func() string {
	var b strings.Builder
	for i := range 10 {
		b.WriteString(" e" + strconv.Itoa(i) + `: echo(message: "` + strconv.Itoa(i) + `", delay_ms: 5000) { message }`)
	}
	return b.String()
}()

// corpus is the fixed part of the suite: the cases of issue 13 and the classic
// hostile inputs, against every door.
func corpus() []*attack {
	jsonMessage := func(v string) string { b, _ := json.Marshal(map[string]string{"message": v}); return string(b) }
	q := url.QueryEscape
	attacks := []*attack{
		// REST.
		call("a good call", "GET", "/v1/hash?text=hello", keyAlpha, ""),
		call("a 900 KB query string", "GET", "/v1/hash?text="+big, keyAlpha, ""),
		call("a 900 KB JSON string", "POST", "/v1/echo", keyAlpha, jsonMessage(big)),
		call("10,000-deep JSON", "POST", "/v1/echo", keyAlpha, `{"message":`+deep+`}`),
		call("NUL and invalid UTF-8 in a query", "GET", "/v1/hash?text=%00%FF%FE", keyAlpha, ""),
		call("NUL in JSON", "POST", "/v1/echo", keyAlpha, `{"message":"a\u0000b"}`),
		call("invalid UTF-8 in JSON", "POST", "/v1/echo", keyAlpha, "{\"message\":\"\xff\xfe\xc3\"}"),
		call("an enormous number", "POST", "/v1/echo", keyAlpha, `{"message":"a","delay_ms":1e400}`),
		call("a long number", "POST", "/v1/echo", keyAlpha, `{"message":"a","delay_ms":`+strings.Repeat("9", 5000)+`}`),
		call("a tiny number", "POST", "/v1/echo", keyAlpha, `{"message":"a","delay_ms":-1e-400}`),
		call("an enormous count", "GET", "/v1/uuid-generator?count=1e400", keyAlpha, ""),
		call("a long count", "GET", "/v1/uuid-generator?count=99999999999999999999999", keyAlpha, ""),
		call("a negative zero", "GET", "/v1/uuid-generator?count=-0", keyAlpha, ""),
		call("a date the API judges wrong (charged)", "GET", "/v1/date-info?date=2026-02-30", keyAlpha, ""),
		call("a malformed key", "GET", "/v1/hash?text=a", "not-a-key", ""),
		call("no key", "GET", "/v1/hash?text=a", "", ""),
		call("an unknown key", "GET", "/v1/hash?text=a", keyUnknown, ""),
		call("a revoked key", "GET", "/v1/hash?text=a", keyRevoked, ""),
		call("a key from the wrong address", "GET", "/v1/hash?text=a", keyOffice, ""),
		call("a key for another API", "POST", "/v1/echo", keyHashOnly, `{"message":"a"}`),
		call("two different keys", "GET", "/v1/hash?text=a", keyAlpha, "", "Authorization", "Bearer "+keyBeta),
		call("a bearer key with spaces", "GET", "/v1/hash?text=a", "", "", "Authorization", "Bearer   "+keyAlpha+"  "),
		call("DELETE", "DELETE", "/v1/hash", keyAlpha, ""),
		call("PATCH", "PATCH", "/v1/catalog", keyAlpha, "{}"),
		call("a preflight", "OPTIONS", "/v1/hash", "", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST"),
		call("an unknown API", "GET", "/v1/nope", keyAlpha, ""),
		call("an invalid UTF-8 path", "GET", "/v1/%FF%00", keyAlpha, ""),
		call("a path beyond an API", "GET", "/v1/hash/extra/%2e%2e", keyAlpha, ""),
		call("text/plain", "POST", "/v1/echo", keyAlpha, `{"message":"a"}`, "Content-Type", "text/plain"),
		call("a broken multipart body", "POST", "/v1/image-info", keyAlpha, "--b\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\n\x00\xff",
			"Content-Type", "multipart/form-data; boundary=b"),
		call("a 900 KB multipart boundary", "POST", "/v1/image-info", keyAlpha, "x", "Content-Type", "multipart/form-data; boundary="+big[:70<<10]),
		call("a file URL on loopback", "POST", "/v1/image-info", keyAlpha, `{"url":"http://127.0.0.1:1/a.png"}`),
		call("a file URL on the metadata address", "POST", "/v1/image-info", keyAlpha, `{"url":"http://169.254.169.254/latest/meta-data/"}`),
		call("a file URL naming localhost", "POST", "/v1/image-info", keyAlpha, `{"url":"http://localhost:1/a.png"}`),
		call("a file URL with credentials", "POST", "/v1/image-info", keyAlpha, `{"url":"http://user:pass@127.0.0.1/a.png"}`),
		call("the catalog", "GET", "/v1/catalog", keyAlpha, ""),
		call("the tiny plan, 1", "GET", "/v1/hash?text=a", keyGamma, ""),
		call("the tiny plan, 2", "GET", "/v1/hash?text=b", keyGamma, ""),
		call("the tiny plan, rate limited", "GET", "/v1/hash?text=c", keyGamma, ""),

		// GraphQL.
		graphQL("a good query", keyAlpha, `{ hash(text: "x") { hash } }`, nil),
		graphQL("10,000-deep nesting", keyAlpha, deepGQ, nil),
		graphQL("5,000-deep nesting, within the length bound", keyAlpha, deepGQWithin, nil),
		graphQL("10,000 aliases", keyAlpha, "{"+aliases(10000, "__typename")+" }", nil),
		graphQL("1,000 aliases, within the length bound", keyAlpha, "{"+aliases(1000, "__typename")+" }", nil),
		graphQL("10,000 aliases of an API", keyAlpha, "{"+aliases(10000, `hash(text: "x") { hash }`)+" }", nil),
		graphQL("aliases of an API with different arguments", keyAlpha, `{ a: hash(text: "a") { hash } b: hash(text: "b") { hash } c: hash(text: "c") { hash } }`, nil),
		graphQL("ten slow calls for the price of one", keyAlpha, "{"+tenEchoes+" }", nil),
		graphQL("a fragment cycle", keyAlpha, `fragment A on Query { ...B } fragment B on Query { ...A } { ...A }`, nil),
		graphQL("a fragment spreading itself", keyAlpha, `fragment A on Query { __typename ...A } { ...A }`, nil),
		graphQL("exponential fragment spreads", keyAlpha, exponential(40, "__typename"), nil),
		graphQL("exponential fragment spreads of an API", keyAlpha, exponential(40, `hash(text: "x") { hash }`), nil),
		graphQL("a fragment on an unknown type", keyAlpha, `fragment F on Nope { x } { ...F }`, nil),
		graphQL("a 900 KB variable", keyAlpha, `query($t: String!) { hash(text: $t) { hash } }`, map[string]any{"t": big}),
		graphQL("10,000-deep variables", keyAlpha, `query($t: String) { __typename }`, json.RawMessage(`{"t":`+deep+`}`)),
		graphQL("NUL in a query", keyAlpha, "{ hash(text: \"\x00\") { hash } }", nil),
		graphQL("NUL in a string", keyAlpha, `{ hash(text: "\u0000") { hash } }`, nil),
		graphQLBody("invalid UTF-8 in the body", keyAlpha, "{\"query\":\"{ hash(text: \\\"\xff\xfe\\\") { hash } }\"}"),
		graphQL("an enormous Int", keyAlpha, `{ uuidgenerator(count: 99999999999999999999) { count } }`, nil),
		graphQL("an enormous variable", keyAlpha, `query($n: Int) { uuidgenerator(count: $n) { count } }`, json.RawMessage(`{"n":1e400}`)),
		graphQL("a mutation", keyAlpha, `mutation { hash(text: "x") { hash } }`, nil),
		graphQL("a subscription", keyAlpha, `subscription { hash(text: "x") { hash } }`, nil),
		graphQL("introspection", keyAlpha, `{ __schema { types { name fields { name args { name } } } } }`, nil),
		graphQL("a REST-only key", keyRESTOnly, `{ hash(text: "x") { hash } }`, nil),
		graphQL("a malformed key", "not-a-key", `{ __typename }`, nil),
		graphQL("the tiny plan, two APIs", keyGamma, `{ hash(text: "x") { hash } echo(message: "m") { message } }`, nil),
		graphQLBody("a body that is not JSON", keyAlpha, "{\"query\":"),
		graphQLBody("a 900 KB body of garbage", keyAlpha, big),
		call("GET /v1/graphql", "GET", "/v1/graphql?query="+q("{ __typename }"), keyAlpha, ""),

		// MCP.
		mcpCall("a good call", toolCall("2", "hash", `{"text":"a"}`)),
		mcpCall("a 900 KB argument", toolCall("3", "echo", `{"message":"`+big+`"}`)),
		mcpCall("10,000-deep arguments", toolCall("4", "echo", `{"message":`+deep+`}`)),
		mcpCall("10,000-deep params", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":`+deep+`}}`),
		mcpCall("NUL in an argument", toolCall("6", "hash", `{"text":"a\u0000b"}`)),
		mcpCall("invalid UTF-8 in an argument", toolCall("7", "hash", "{\"text\":\"\xff\xfe\"}")),
		mcpCall("an enormous id", toolCall("1e400", "hash", `{"text":"a"}`)),
		mcpCall("a long id", toolCall(strings.Repeat("9", 5000), "hash", `{"text":"a"}`)),
		mcpCall("an object id", toolCall(`{"a":[1]}`, "hash", `{"text":"a"}`)),
		mcpCall("an enormous count", toolCall("8", "uuid-generator", `{"count":1e400}`)),
		mcpCall("a batch of 1,000 pings", "["+strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":9,"method":"ping"},`, 1000), ",")+"]"),
		mcpCall("a batch of two tool calls", "["+toolCall("10", "hash", `{"text":"a"}`)+","+toolCall("11", "uuid-generator", `{}`)+"]"),
		mcpCall("a batch without a session", `[{"jsonrpc":"2.0","id":12,"method":"tools/list"}]`, "Mcp-Session-Id", ""),
		mcpCall("an unknown session", `{"jsonrpc":"2.0","id":13,"method":"tools/list"}`, "Mcp-Session-Id", "no-such-session"),
		mcpCall("Accept without text/event-stream", `{"jsonrpc":"2.0","id":14,"method":"tools/list"}`, "Accept", "application/json"),
		mcpCall("text/plain", `{"jsonrpc":"2.0","id":15,"method":"tools/list"}`, "Content-Type", "text/plain"),
		mcpCall("rpc.discover", `{"jsonrpc":"2.0","id":16,"method":"rpc.discover"}`),
		mcpCall("rpc.discover in a batch", `[{"jsonrpc":"2.0","id":17,"method":"rpc.discover"}]`),
		mcpCall("an unknown protocol version", `{"jsonrpc":"2.0","id":18,"method":"tools/list"}`, "Mcp-Protocol-Version", "1999-01-01"),
		mcpCall("the sessionless protocol", `{"jsonrpc":"2.0","id":19,"method":"tools/list"}`, "Mcp-Protocol-Version", "2026-07-28"),
		mcpCall("initialize again", mcpInit),
		mcpCall("initialized again", `{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		mcpCall("ten calls in a batch, beyond the plan's concurrency", "["+strings.TrimSuffix(strings.Repeat(toolCall("20", "echo", `{"message":"m","delay_ms":100}`)+",", 10), ",")+"]"),
		mcpCall("no key", mcpInit, "X-Api-Key", ""),
		mcpCall("a malformed key", mcpInit, "X-Api-Key", "not-a-key"),
		mcpCall("a revoked key", mcpInit, "X-Api-Key", keyRevoked),
		mcpCall("a bearer token", mcpInit, "X-Api-Key", "", "Authorization", "Bearer "+big[:4000]),
		mcpCall("a 900 KB body of garbage", big),
		{name: "mcp: the event stream", method: "GET", target: "/v1/mcp", session: true, stream: true,
			header: header("X-Api-Key", keyBeta, "Accept", "text/event-stream")},
		{name: "mcp: GET without text/event-stream", method: "GET", target: "/v1/mcp", session: true,
			header: header("X-Api-Key", keyBeta, "Accept", "application/json")},
		{name: "mcp: DELETE without a session", method: "DELETE", target: "/v1/mcp", header: header("X-Api-Key", keyBeta)},
		{name: "mcp: PATCH", method: "PATCH", target: "/v1/mcp", header: header("X-Api-Key", keyBeta)},

		// The admin API (its account scratch only).
		call("admin: no token", "GET", "/admin/v1/accounts/scratch", "", ""),
		call("admin: a wrong token", "GET", "/admin/v1/accounts/scratch", "", "", "Authorization", "Bearer "+big[:10000]),
		adminCall("a 900 KB account id", "POST", "/admin/v1/accounts", `{"id":"`+big+`","plan":"open"}`),
		adminCall("10,000-deep JSON", "POST", "/admin/v1/accounts", `{"id":`+deep+`}`),
		adminCall("NUL in an id", "POST", "/admin/v1/accounts", `{"id":"a\u0000b","plan":"open"}`),
		adminCall("invalid UTF-8 in an id", "POST", "/admin/v1/accounts", "{\"id\":\"\xff\",\"plan\":\"open\"}"),
		adminCall("an enormous amount", "POST", "/admin/v1/accounts/scratch/credits", `{"amount":1e400,"reason":"r"}`),
		adminCall("the largest amount", "POST", "/admin/v1/accounts/scratch/credits", `{"amount":9223372036854775807,"reason":"r"}`),
		adminCall("the smallest amount", "POST", "/admin/v1/accounts/scratch/credits", `{"amount":-9223372036854775808,"reason":"r"}`),
		adminCall("a 900 KB reason", "POST", "/admin/v1/accounts/scratch/credits", `{"amount":1,"reason":"`+big+`"}`),
		adminCall("10,000 allowed IPs", "POST", "/admin/v1/accounts/scratch/keys", `{"name":"k","allowed_ips":[`+strings.TrimSuffix(strings.Repeat(`"10.0.0.0/8",`, 10000), ",")+`]}`),
		adminCall("an unknown route with NUL", "GET", "/admin/v1/%00/%FF", ""),
		adminCall("a 900 KB account path", "GET", "/admin/v1/accounts/"+big[:100<<10], ""),

		// The authorization server.
		oauthCall("a 900 KB registration", "POST", "/oauth/register", "application/json", `{"redirect_uris":["https://a.example/cb"],"client_name":"`+big+`"}`),
		oauthCall("10,000-deep registration", "POST", "/oauth/register", "application/json", `{"redirect_uris":`+deep+`}`),
		oauthCall("NUL in a registration", "POST", "/oauth/register", "application/json", `{"redirect_uris":["https://a.example/c\u0000b"]}`),
		oauthCall("invalid UTF-8 in a registration", "POST", "/oauth/register", "application/json", "{\"redirect_uris\":[\"https://a.example/\xff\"]}"),
		oauthCall("10,000 redirect URIs", "POST", "/oauth/register", "application/json", `{"redirect_uris":[`+strings.TrimSuffix(strings.Repeat(`"https://a.example/cb",`, 10000), ",")+`]}`),
		oauthCall("an authorization request of garbage", "GET", "/oauth/authorize?client_id=%00&redirect_uri=%FF&response_type=code&code_challenge="+big[:8000], "", ""),
		oauthCall("a consent of garbage", "POST", "/oauth/authorize", "application/x-www-form-urlencoded", "key="+big[:100000]+"&request=%00"),
		oauthCall("a token request of garbage", "POST", "/oauth/token", "application/x-www-form-urlencoded", "grant_type=authorization_code&code=%00%FF&code_verifier="+big[:100000]),
		oauthCall("a token request in JSON", "POST", "/oauth/token", "application/json", `{"grant_type":`+deep+`}`),
		oauthCall("a revocation of garbage", "POST", "/oauth/revoke", "application/x-www-form-urlencoded", "token="+big),
		oauthCall("the server metadata", "GET", "/.well-known/oauth-authorization-server", "", ""),
		oauthCall("the resource metadata", "GET", "/.well-known/oauth-protected-resource/v1/mcp", "", ""),
	}
	return attacks
}

// rawCorpus is written as bytes on connections of its own: requests that net/http's
// client will not send. Each asks for at most answers requests; a request hidden in
// another's body (smuggling) would show as one answer too many.
func rawCorpus() []rawAttack {
	// The hidden request closes the connection, so that its answer, if there is one,
	// is the last.
	get := "GET /v1/hash?text=smuggled HTTP/1.1\r\nHost: t\r\nX-Api-Key: " + keyRaw + "\r\nConnection: close\r\n\r\n"
	post := func(headers, body string) string {
		return "POST /v1/echo HTTP/1.1\r\nHost: t\r\nX-Api-Key: " + keyRaw + "\r\nContent-Type: application/json\r\n" + headers + "\r\n" + body
	}
	return []rawAttack{
		// net/http frames a request with both Content-Length and Transfer-Encoding by
		// the latter, and serves the bytes after it as the next request on the
		// connection, where RFC 9112 section 6.1 wants the connection closed
		// (golang/go#80942). No proxy stands in front of this server to read the bytes
		// otherwise, so the second answer is the client's own pipelining; the suite
		// checks that it is charged and reported like any other. Once net/http closes
		// the connection, these get one answer.
		{"raw: CL+TE", "raw", post("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"+get), 2, false},
		{"raw: TE+CL", "raw", post("Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", "5c\r\n"+`{"message":"x"}`+strings.Repeat(" ", 77)+"\r\n0\r\n\r\n"+get), 2, false},
		{"raw: TE obfuscated", "raw", post("Transfer-Encoding: xchunked\r\nContent-Length: 15\r\n", `{"message":"x"}`+get), 2, false},
		{"raw: TE with a space before the colon", "raw", post("Transfer-Encoding : chunked\r\nContent-Length: 15\r\n", `{"message":"x"}`+get), 2, false},
		{"raw: TE chunked, identity", "raw", post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"+get), 2, false},
		{"raw: TE twice", "raw", post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"+get), 2, false},
		{"raw: two Content-Lengths", "raw", post("Content-Length: 15\r\nContent-Length: 0\r\n", `{"message":"x"}`+get), 2, false},
		{"raw: a negative Content-Length", "raw", post("Content-Length: -1\r\n", `{"message":"x"}`), 1, false},
		{"raw: an enormous Content-Length", "raw", post("Content-Length: 99999999999999999999\r\n", `{"message":"x"}`), 1, false},
		{"raw: a huge chunk size", "raw", post("Transfer-Encoding: chunked\r\n", "ffffffffffffffffffff\r\n"+`{"message":"x"}`+"\r\n0\r\n\r\n"), 1, false},
		{"raw: a 2^63 chunk size", "raw", post("Transfer-Encoding: chunked\r\n", "8000000000000000\r\n"+`{"message":"x"}`+"\r\n0\r\n\r\n"), 1, true},
		{"raw: a chunk size with an extension", "raw", post("Transfer-Encoding: chunked\r\n", "f;a=\"\x00\"\r\n"+`{"message":"x"}`+"\r\n0\r\n\r\n"), 1, false},
		{"raw: a chunk longer than it says", "raw", post("Transfer-Encoding: chunked\r\n", "2\r\n"+`{"message":"x"}`+"\r\n0\r\n\r\n"), 1, false},
		{"raw: NUL in a header", "raw", "GET /v1/hash?text=a HTTP/1.1\r\nHost: t\r\nX-Api-Key: " + keyRaw + "\x00\r\n\r\n", 1, false},
		{"raw: NUL in the path", "raw", "GET /v1/hash\x00?text=a HTTP/1.1\r\nHost: t\r\nX-Api-Key: " + keyRaw + "\r\n\r\n", 1, false},
		{"raw: a folded header", "raw", "GET /v1/hash?text=a HTTP/1.1\r\nHost: t\r\nX-Api-Key: \r\n " + keyRaw + "\r\n\r\n", 1, false},
		{"raw: no Host", "raw", "GET /v1/hash?text=a HTTP/1.1\r\nX-Api-Key: " + keyRaw + "\r\n\r\n", 1, false},
		{"raw: HTTP/1.0", "raw", "GET /v1/hash?text=a HTTP/1.0\r\nX-Api-Key: " + keyRaw + "\r\n\r\n", 1, false},
		{"raw: garbage", "raw", "\x00\xff\xfe GARBAGE\r\n\r\n", 1, false},
		{"raw: a 2 MB header", "raw", "GET /v1/hash?text=a HTTP/1.1\r\nHost: t\r\nX-Pad: " + big + big + big + "\r\nX-Api-Key: " + keyRaw + "\r\n\r\n", 1, false},
		{"raw: two pipelined requests", "raw", strings.Replace(get, "Connection: close\r\n", "", 1) + get, 2, false},
	}
}

// Pools the random requests draw from.
var (
	randomKeys    = []string{keyAlpha, keyAlpha, keyBeta, keyBeta, keyRESTOnly, keyHashOnly, keyOffice, keyRevoked, keyGamma, keyUnknown, "not-a-key", ""}
	randomStrings = []string{"", "a", "hello", "x y", "\x00", "\xff\xfe", "é✓🎉", `"`, `\`, "{", "%", "<script>", "2026-02-30", "2024-02-29",
		"md5", "sha256", "sha512", "http://127.0.0.1/a.png", "http://169.254.169.254/", "-1", "0", "1e400", "99999999999999999999",
		strings.Repeat("a", 1001), strings.Repeat("b", 10001)}
	randomNumbers = []string{"0", "1", "-1", "3", "100", "101", "5001", "1.5", "-0", "1e400", "-1e400", "99999999999999999999", "9223372036854775808", "null", `"7"`, "true", "[]", "{}"}
	restAPIs      = []string{"hash", "echo", "uuid-generator", "date-info", "hmac", "image-info", "catalog", "nope", "graphql", ""}
	restParams    = []string{"text", "message", "delay_ms", "count", "date", "secret", "algorithm", "encoding", "url", "zzz", ""}
	gqlFields     = []string{`hash(text: S) { hash algorithm }`, `echo(message: S, delay_ms: N) { message delay_ms }`, `uuidgenerator(count: N) { uuids count }`,
		`dateinfo(date: S) { date day_of_week }`, `hmac(message: S, secret: S) { hmac }`, `imageinfo(url: S) { format }`, `__typename`,
		`__type(name: S) { name }`, `nope`, `hash { hash }`}
	mcpMethods = []string{"tools/call", "tools/call", "tools/call", "tools/list", "ping", "initialize", "notifications/initialized",
		"notifications/cancelled", "resources/read", "prompts/get", "logging/setLevel", "completion/complete", "rpc.discover", "server/discover", ""}
	mcpTools   = []string{"hash", "echo", "uuid-generator", "date-info", "hmac", "image-info", "nope"}
	oauthPaths = []string{"/oauth/register", "/oauth/authorize", "/oauth/token", "/oauth/revoke", "/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/v1/mcp"}
	adminPaths = []string{"/admin/v1/accounts", "/admin/v1/accounts/scratch", "/admin/v1/accounts/scratch/keys", "/admin/v1/accounts/scratch/credits",
		"/admin/v1/keys/" + keyUnknown + "/rotate", "/admin/v1/keys/x/revoke", "/admin/v1/accounts/S", "/admin/v1/S"}
	methods = []string{"GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}
)

func pick[T any](rng *rand.Rand, list []T) T { return list[rng.IntN(len(list))] }

// jsonString returns s as a JSON string, keeping invalid UTF-8 and NUL bytes as they
// are: a hostile client sends them raw.
func jsonString(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// mutate changes a few bytes of b at random: a byte replaced, inserted or removed,
// or the whole cut short.
func mutate(rng *rand.Rand, b string) string {
	if len(b) == 0 {
		return string(rune(rng.IntN(256)))
	}
	for range 1 + rng.IntN(3) {
		i := rng.IntN(len(b))
		switch rng.IntN(4) {
		case 0:
			b = b[:i] + string([]byte{byte(rng.IntN(256))}) + b[min(i+1, len(b)):]
		case 1:
			b = b[:i] + pick(rng, []string{"{", "}", "[", "]", `"`, ",", ":", "\x00", "\xff", "\\", "$", "@", "...", "#"}) + b[i:]
		case 2:
			b = b[:i] + b[min(i+1+rng.IntN(8), len(b)):]
		default:
			b = b[:i]
		}
		if len(b) == 0 {
			break
		}
	}
	return b
}

// randomAttack returns the i-th random request: a door, then a request to it made
// from the pools, sometimes with its body mutated.
func randomAttack(rng *rand.Rand, i int) *attack {
	name := "random " + strconv.Itoa(i) + ": "
	key := pick(rng, randomKeys)
	var a *attack
	switch door := rng.IntN(100); {
	case door < 30:
		a = wellFormed(rng)
	case door < 50:
		a = randomREST(rng, key)
	case door < 67:
		a = randomGraphQL(rng, key)
	case door < 82:
		a = randomMCP(rng, key)
	case door < 91:
		a = randomAdmin(rng)
	default:
		a = randomOAuth(rng)
	}
	if len(a.body) > 0 && rng.IntN(5) == 0 {
		a.body = []byte(mutate(rng, string(a.body)))
	}
	a.name = name + a.name
	return a
}

// A paidCall is a well-formed call of an API, as REST query parameters or JSON,
// a GraphQL field and MCP tool arguments.
type paidCall struct {
	api, query, json, field string
}

// randomPaidCall returns a well-formed call with random values, most of which the
// APIs take; a date the date-info API judges wrong is charged all the same.
func randomPaidCall(rng *rand.Rand) paidCall {
	word := pick(rng, []string{"a", "hello", "x y", "é✓🎉", `"q"`, strconv.Itoa(rng.IntN(1000))})
	w, _ := json.Marshal(word)
	switch rng.IntN(5) {
	case 0:
		alg := pick(rng, []string{"md5", "sha1", "sha256", "sha512"})
		return paidCall{"hash", "text=" + url.QueryEscape(word) + "&algorithm=" + alg, `{"text":` + string(w) + `,"algorithm":"` + alg + `"}`,
			`hash(text: ` + string(w) + `, algorithm: ` + alg + `) { hash }`}
	case 1:
		n := strconv.Itoa(1 + rng.IntN(5))
		return paidCall{"uuid-generator", "count=" + n, `{"count":` + n + `}`, `uuidgenerator(count: ` + n + `) { count uuids }`}
	case 2:
		d := pick(rng, []string{"2024-02-29", "2026-01-15", "1999-12-31", "2026-02-30", "2023-02-29"})
		return paidCall{"date-info", "date=" + d, `{"date":"` + d + `"}`, `dateinfo(date: "` + d + `") { date day_of_week }`}
	case 3:
		ms := strconv.Itoa(rng.IntN(20))
		return paidCall{"echo", "", `{"message":` + string(w) + `,"delay_ms":` + ms + `}`, `echo(message: ` + string(w) + `, delay_ms: ` + ms + `) { message }`}
	}
	return paidCall{"hmac", "", `{"message":` + string(w) + `,"secret":"k"}`, `hmac(message: ` + string(w) + `, secret: "k") { hmac }`}
}

// wellFormed returns a well-formed paid request to a door: a REST call, a GraphQL
// query of up to three APIs (an API named twice with the same arguments), or MCP
// tool calls, alone or in a batch.
func wellFormed(rng *rand.Rand) *attack {
	key := pick(rng, []string{keyAlpha, keyBeta, keyBeta, keyGamma})
	switch rng.IntN(3) {
	case 0:
		c := randomPaidCall(rng)
		if c.query == "" {
			return call("a paid call", "POST", "/v1/"+c.api, key, c.json)
		}
		return call("a paid call", "GET", "/v1/"+c.api+"?"+c.query, key, "")
	case 1:
		var q strings.Builder
		seen := map[string]bool{}
		q.WriteString("{")
		for i := range 1 + rng.IntN(3) {
			c := randomPaidCall(rng)
			if seen[c.api] {
				continue // an API named twice needs the same arguments
			}
			seen[c.api] = true
			q.WriteString(" a" + strconv.Itoa(i) + ": " + c.field)
			if rng.IntN(4) == 0 {
				q.WriteString(" b" + strconv.Itoa(i) + ": " + c.field)
			}
		}
		return graphQL("a paid query", key, q.String()+" }", nil)
	}
	body := ""
	for i := range 1 + rng.IntN(3) {
		c := randomPaidCall(rng)
		if i > 0 {
			body += ","
		}
		body += toolCall(strconv.Itoa(i+1), c.api, c.json)
	}
	if strings.Count(body, `"method"`) > 1 {
		body = "[" + body + "]"
	}
	return mcpCall("paid tool calls", body, "X-Api-Key", keyBeta)
}

func randomREST(rng *rand.Rand, key string) *attack {
	api := pick(rng, restAPIs)
	params := map[string]string{}
	for range rng.IntN(4) {
		v := pick(rng, randomStrings)
		if rng.IntN(2) == 0 {
			v = pick(rng, randomNumbers)
		}
		params[pick(rng, restParams)] = v
	}
	method := "GET"
	if api == "echo" || api == "hmac" || api == "image-info" || rng.IntN(6) == 0 {
		method = "POST"
	}
	if rng.IntN(10) == 0 {
		method = pick(rng, methods)
	}
	if method != "POST" {
		v := url.Values{}
		for k, p := range params {
			v.Set(k, p)
		}
		return call("GET "+api, method, "/v1/"+api+"?"+v.Encode(), key, "")
	}
	var b strings.Builder
	b.WriteString("{")
	first := true
	for k, v := range params {
		if !first {
			b.WriteString(",")
		}
		first = false
		if v != "" && (strings.HasPrefix(v, "1e") || v == "null" || v == "true" || v == "[]" || v == "{}" || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			b.WriteString(jsonString(k) + ":" + v)
		} else {
			b.WriteString(jsonString(k) + ":" + jsonString(v))
		}
	}
	b.WriteString("}")
	return call("POST "+api, "POST", "/v1/"+api, key, b.String())
}

func randomGraphQL(rng *rand.Rand, key string) *attack {
	var q strings.Builder
	vars := map[string]any{}
	frag := rng.IntN(4) == 0
	if rng.IntN(3) == 0 {
		q.WriteString("query($s: String, $n: Int, $b: Boolean!) ")
		vars["s"], vars["n"], vars["b"] = pick(rng, randomStrings), json.RawMessage(pick(rng, randomNumbers)), rng.IntN(2) == 0
	}
	q.WriteString("{")
	for j := range 1 + rng.IntN(4) {
		f := pick(rng, gqlFields)
		f = strings.NewReplacer("S", pick(rng, []string{`"x"`, `"x"`, `"hello"`, jsonString(pick(rng, randomStrings)), "$s", "5"}),
			"N", pick(rng, []string{"1", "2", "$n", "-1", "99999999999999999999", `"3"`, "null"})).Replace(f)
		if rng.IntN(3) == 0 {
			f = "a" + strconv.Itoa(j) + ": " + f
		}
		if len(vars) > 0 && rng.IntN(4) == 0 {
			f = strings.Replace(f, " {", " @include(if: $b) {", 1)
		}
		q.WriteString(" " + f)
	}
	if frag {
		q.WriteString(" ...F }\nfragment F on Query { " + pick(rng, gqlFields) + " }")
	} else {
		q.WriteString(" }")
	}
	query := q.String()
	if rng.IntN(4) == 0 {
		query = mutate(rng, query)
	}
	if len(vars) == 0 {
		return graphQL("a query", key, query, nil)
	}
	return graphQL("a query with variables", key, query, vars)
}

func randomMCP(rng *rand.Rand, key string) *attack {
	message := func() string {
		method := pick(rng, mcpMethods)
		id := pick(rng, []string{"1", "2", `"s"`, "null", "1e400", "{}", "-1", ""})
		var params string
		switch method {
		case "tools/call":
			args := map[string]any{}
			for range rng.IntN(3) {
				args[pick(rng, restParams)] = json.RawMessage(pick(rng, append([]string{jsonString(pick(rng, randomStrings))}, randomNumbers...)))
			}
			b, _ := json.Marshal(args)
			params = `{"name":"` + pick(rng, mcpTools) + `","arguments":` + string(b) + `}`
		case "initialize":
			params = `{"protocolVersion":"` + pick(rng, []string{"2025-06-18", "2025-03-26", "2026-07-28", "x"}) + `","capabilities":{},"clientInfo":{"name":"r","version":"1"}}`
		default:
			params = pick(rng, []string{"{}", "null", "[]", `{"uri":"file:///etc/passwd"}`, `{"level":"debug"}`, `{"requestId":1}`, ""})
		}
		m := `{"jsonrpc":"2.0"`
		if id != "" {
			m += `,"id":` + id
		}
		if method != "" {
			m += `,"method":"` + method + `"`
		}
		if params != "" {
			m += `,"params":` + params
		}
		return m + "}"
	}
	body := message()
	if rng.IntN(6) == 0 {
		body = "[" + body + "," + message() + "]"
	}
	if key == "" || rng.IntN(3) > 0 {
		key = keyBeta
	}
	a := mcpCall("a message", body, "X-Api-Key", key)
	switch rng.IntN(12) {
	case 0:
		a.session = false
	case 1:
		a.header.Set("Accept", pick(rng, []string{"application/json", "text/event-stream", "*/*", ""}))
	case 2:
		a.header.Set("Content-Type", pick(rng, []string{"text/plain", "application/json; charset=latin1", ""}))
	case 3:
		a.header.Set("Mcp-Protocol-Version", pick(rng, []string{"2025-03-26", "2025-06-18", "2026-07-28", "1999-01-01", "x"}))
	case 4:
		a.session = false
		a.header.Set("Mcp-Session-Id", pick(rng, []string{"no-such-session", "\t", strings.Repeat("s", 4000)}))
	case 5:
		a.method = pick(rng, []string{"PUT", "DELETE", "PATCH"})
		a.session = a.method != "DELETE" // never end the suite's session
	case 6:
		a.method, a.body = "GET", nil
		a.session = false
		a.header.Set("Accept", pick(rng, []string{"text/event-stream", "application/json"}))
	}
	return a
}

func randomAdmin(rng *rand.Rand) *attack {
	path := strings.ReplaceAll(pick(rng, adminPaths), "S", url.PathEscape(pick(rng, randomStrings)))
	body := pick(rng, []string{"", `{}`, `{"id":` + jsonString(pick(rng, randomStrings)) + `,"plan":"open"}`,
		`{"plan":"` + pick(rng, []string{"open", "tiny", "nope", ""}) + `","credits":` + pick(rng, randomNumbers) + `}`,
		`{"amount":` + pick(rng, randomNumbers) + `,"reason":` + jsonString(pick(rng, randomStrings)) + `}`,
		`{"name":` + jsonString(pick(rng, randomStrings)) + `,"apis":["hash"],"channels":["` + pick(rng, []string{"rest", "mcp", "x"}) + `"],"allowed_ips":["` + pick(rng, []string{"10.0.0.0/8", "::1", "x", ""}) + `"]}`})
	a := adminCall("a request", pick(rng, methods), path, body)
	if rng.IntN(8) == 0 {
		a.header.Del("Authorization")
	}
	return a
}

func randomOAuth(rng *rand.Rand) *attack {
	path := pick(rng, oauthPaths)
	v := url.Values{}
	for _, k := range []string{"client_id", "redirect_uri", "response_type", "code_challenge", "code_challenge_method", "state", "grant_type", "code", "code_verifier", "refresh_token", "token", "resource", "scope"} {
		if rng.IntN(3) == 0 {
			v.Set(k, pick(rng, append(randomStrings, "code", "S256", "authorization_code", "refresh_token", "https://127.0.0.1/cb")))
		}
	}
	switch path {
	case "/oauth/register":
		return oauthCall("register", "POST", path, "application/json",
			`{"redirect_uris":[`+jsonString(pick(rng, randomStrings))+`],"client_name":`+jsonString(pick(rng, randomStrings))+`,"token_endpoint_auth_method":"none"}`)
	case "/oauth/authorize":
		if rng.IntN(2) == 0 {
			return oauthCall("authorize", "GET", path+"?"+v.Encode(), "", "")
		}
		return oauthCall("consent", "POST", path, "application/x-www-form-urlencoded", v.Encode())
	case "/oauth/token", "/oauth/revoke":
		return oauthCall("token", "POST", path, "application/x-www-form-urlencoded", v.Encode())
	}
	return oauthCall("metadata", pick(rng, methods), path, "", "")
}
