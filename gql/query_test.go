package gql_test

import (
	"net/http"
	"testing"
)

// TestVariables: typed variables, with defaults, reach the APIs as literals would; the
// call key sees through them (a literal and a variable of one value run once).
func TestVariables(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	const q = `query Digest($t: String!, $alg: HashAlgorithm = md5) { hash(text: $t, algorithm: $alg) { algorithm hash } }`
	tests := []struct {
		name      string
		vars      map[string]any
		alg, hash string
	}{
		{"the variable's default", map[string]any{"t": "hello"}, "md5", md5Hex("hello")},
		{"a given enum value", map[string]any{"t": "hello", "alg": "sha256"}, "sha256", helloSHA256},
		{"null for a variable with a default: the argument's default", map[string]any{"t": "hello", "alg": nil}, "sha256", helloSHA256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := wantOK(t, h.query(t, acct.Key, q, tt.vars))
			if got := field(t, data, "hash", "algorithm"); got != tt.alg {
				t.Errorf("algorithm %v, want %s", got, tt.alg)
			}
			if got := field(t, data, "hash", "hash"); got != tt.hash {
				t.Errorf("hash %v, want %s", got, tt.hash)
			}
		})
	}

	data := wantOK(t, h.query(t, acct.Key, `query($n: Int) { uuidgenerator(count: $n) { count uuids } }`, map[string]any{"n": 3}))
	if got := field(t, data, "uuidgenerator", "count"); got != jsonNumber("3") {
		t.Errorf("count %v", got)
	}
	if got := len(field(t, data, "uuidgenerator", "uuids").([]any)); got != 3 {
		t.Errorf("%d uuids", got)
	}

	// A literal and a variable with the same value are one call.
	runs := h.runs.get("echo")
	wantOK(t, h.query(t, acct.Key, `query($m: String!, $d: Int) { a: echo(message: $m, delay_ms: $d) { message } b: echo(message: "same", delay_ms: 0) { message } }`, map[string]any{"m": "same", "d": 0}))
	if got := h.runs.get("echo") - runs; got != 1 {
		t.Errorf("echo ran %d times, want 1", got)
	}

	// Variables the query does not declare are ignored; missing and mistyped ones are
	// refused (see TestRequestErrors and TestBadUserInput).
	wantOK(t, h.query(t, acct.Key, `{ __typename }`, map[string]any{"unused": 1}))
	before := h.balance(t, acct.ID)
	wantError(t, h.query(t, acct.Key, `query($t: String!) { hash(text: $t) { hash } }`, nil), http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED")
	wantGatewayError(t, h.query(t, acct.Key, `query($n: Int) { uuidgenerator(count: $n) { count } }`, map[string]any{"n": "3"}), http.StatusBadRequest, "BAD_USER_INPUT", "count")
	if got := h.balance(t, acct.ID); got != before {
		t.Errorf("refused queries cost %d", before-got)
	}
}

// TestFragments: named and inline fragments, on result types and on Query, are
// expanded before the plan: the APIs they name are charged and run.
func TestFragments(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name, query string
		want        string
		cost        int64
	}{
		{"named, on a result type", `fragment H on HashResult { hash algorithm } { hash(text: "hello") { ...H } }`,
			`{"hash":{"hash":"` + helloSHA256 + `","algorithm":"sha256"}}`, 1},
		{"inline, on a result type", `{ hash(text: "hello") { ... on HashResult { hash } } }`,
			`{"hash":{"hash":"` + helloSHA256 + `"}}`, 1},
		{"inline, without a type condition", `{ hash(text: "hello") { ... { algorithm } } }`,
			`{"hash":{"algorithm":"sha256"}}`, 1},
		{"named, on Query, naming two APIs", `fragment Q on Query { hash(text: "hello") { hash } echo(message: "m") { message } } { ...Q }`,
			`{"hash":{"hash":"` + helloSHA256 + `"},"echo":{"message":"m"}}`, 2},
		{"nested fragments", `fragment A on Query { ...B } fragment B on Query { echo(message: "deep") { ...E } } fragment E on EchoResult { message } { ...A }`,
			`{"echo":{"message":"deep"}}`, 1},
		{"inline on Query with an alias", `{ ... on Query { d: dateinfo(date: "2024-02-29") { isleapyear } } }`,
			`{"d":{"isleapyear":true}}`, 1},
	}
	balance := h.balance(t, acct.ID)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.query(t, acct.Key, tt.query, nil)
			wantOK(t, r)
			if string(r.Data) != tt.want {
				t.Errorf("data %s, want %s", r.Data, tt.want)
			}
			balance -= tt.cost
			wantCredits(t, r, "pro", tt.cost, balance)
		})
	}
}

// TestAliases: aliases rename root fields and result fields; data is keyed by them.
func TestAliases(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	r := h.query(t, acct.Key, `{ first: hash(text: "hello") { digest: hash alg: algorithm } second: uuidgenerator(count: 2) { ids: uuids n: count } hash(text: "hello") { hash } }`, nil)
	data := wantOK(t, r)
	if got := keys(data); len(got) != 3 || got[0] != "first" || got[1] != "hash" || got[2] != "second" {
		t.Errorf("keys %v", got)
	}
	if got := field(t, data, "first", "digest"); got != helloSHA256 {
		t.Errorf("first.digest %v", got)
	}
	if got := field(t, data, "first", "alg"); got != "sha256" {
		t.Errorf("first.alg %v", got)
	}
	if got := len(field(t, data, "second", "ids").([]any)); got != 2 {
		t.Errorf("second.ids has %d", got)
	}
	if got := field(t, data, "hash", "hash"); got != helloSHA256 {
		t.Errorf("hash.hash %v", got)
	}
	// hash twice (one call: first and hash share arguments) and uuid-generator.
	wantCredits(t, r, "pro", 2, 100000-2)
	if got := h.runs.get("hash"); got != 1 {
		t.Errorf("hash ran %d times", got)
	}
}

// TestSkipInclude: @skip and @include, with variables or literals, are applied before
// the plan: a skipped API is neither charged nor run, nor checked against the plan.
func TestSkipInclude(t *testing.T) {
	const q = `query($s: Boolean!, $i: Boolean!) {
		hash(text: "hello") @skip(if: $s) { hash }
		echo(message: "m") @include(if: $i) { message }
	}`
	tests := []struct {
		name  string
		skip  bool
		incl  bool
		want  string
		runs  map[string]int
		cost  int64
		media string
	}{
		{"both", false, true, `{"hash":{"hash":"` + helloSHA256 + `"},"echo":{"message":"m"}}`, map[string]int{"hash": 1, "echo": 1}, 2, ""},
		{"hash skipped", true, true, `{"echo":{"message":"m"}}`, map[string]int{"echo": 1}, 1, ""},
		{"echo not included", false, false, `{"hash":{"hash":"` + helloSHA256 + `"}}`, map[string]int{"hash": 1}, 1, ""},
		{"neither", true, false, `{}`, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, config{})
			acct := h.newAccount(t, "pro", 100)
			r := h.query(t, acct.Key, q, map[string]any{"s": tt.skip, "i": tt.incl})
			wantOK(t, r)
			if string(r.Data) != tt.want {
				t.Errorf("data %s, want %s", r.Data, tt.want)
			}
			wantCredits(t, r, "pro", tt.cost, 100-tt.cost)
			for _, id := range []string{"hash", "echo"} {
				if got := h.runs.get(id); got != tt.runs[id] {
					t.Errorf("%s ran %d times, want %d", id, got, tt.runs[id])
				}
			}
		})
	}

	h := newHarness(t, config{})
	free := h.newAccount(t, "free", -1)
	// A skipped API the plan would refuse (a second API on the free plan) is fine...
	const plan = `query($s: Boolean!) { hash(text: "hello") { hash } echo(message: "m") @skip(if: $s) { message } }`
	r := h.query(t, free.Key, plan, map[string]any{"s": true})
	wantOK(t, r)
	wantCredits(t, r, "free", 1, 49)
	// ...and the same query with it included is refused.
	wantGatewayError(t, h.query(t, free.Key, plan, map[string]any{"s": false}), http.StatusForbidden, "PLAN_LIMIT_EXCEEDED", "2 APIs")
	// A skipped file API is fine too, and so is a skipped result field.
	r = h.query(t, free.Key, `{ imageinfo(url: "https://example.com/a.png") @skip(if: true) { format } hash(text: "hello") { hash algorithm @include(if: false) } }`, nil)
	wantOK(t, r)
	if want := `{"hash":{"hash":"` + helloSHA256 + `"}}`; string(r.Data) != want {
		t.Errorf("data %s, want %s", r.Data, want)
	}
	// Skipped through a fragment spread.
	r = h.query(t, free.Key, `query($s: Boolean!) { ...E @skip(if: $s) hash(text: "x") { hash } } fragment E on Query { echo(message: "m") { message } }`, map[string]any{"s": true})
	wantOK(t, r)
	if got := h.runs.get("echo"); got != 0 {
		t.Errorf("echo ran %d times", got)
	}
	if got := h.balance(t, free.ID); got != 47 {
		t.Errorf("balance %d, want 47", got)
	}
}

// TestOperationName: of several operations, the one named runs, and only its APIs are
// charged.
func TestOperationName(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	doc := `query A { hash(text: "hello") { hash } } query B { echo(message: "b") { message } uuidgenerator { count } }`
	r := h.post(t, acct.Key, mustJSON(t, map[string]any{"query": doc, "operationName": "B"}))
	wantOK(t, r)
	if want := `{"echo":{"message":"b"},"uuidgenerator":{"count":1}}`; string(r.Data) != want {
		t.Errorf("data %s, want %s", r.Data, want)
	}
	wantCredits(t, r, "pro", 2, 100000-2)
	if h.runs.get("hash") != 0 {
		t.Error("operation A ran")
	}
	r = h.post(t, acct.Key, mustJSON(t, map[string]any{"query": doc, "operationName": "A"}))
	wantOK(t, r)
	wantCredits(t, r, "pro", 1, 100000-3)
}

// TestObjectsWithoutScalars: a query that selects an object of a result and none of its
// scalars (only __typename, or every field skipped), whose answer the plan cannot shape,
// is answered all the same, the first time and from the kept plan: its API runs and is
// charged once per request, and a failed call is null with its error.
func TestObjectsWithoutScalars(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	tests := []struct {
		name, query string
		vars        map[string]any
		want        string
	}{
		{"__typename only", `{ hash(text: "hello") { __typename } }`, nil, `{"hash":{"__typename":"HashResult"}}`},
		{"every field skipped", `query($s: Boolean!) { h: hash(text: "hello") { hash @skip(if: $s) } }`, map[string]any{"s": true}, `{"h":{}}`},
		{"beside a scalar", `{ a: hash(text: "hello") { __typename } b: hash(text: "hello") { hash } }`, nil,
			`{"a":{"__typename":"HashResult"},"b":{"hash":"` + helloSHA256 + `"}}`},
		{"nested", `{ nested { level1 { name level2 { __typename } } } }`, nil,
			`{"nested":{"level1":{"name":"one","level2":{"__typename":"NestedResultLevel1Level2"}}}}`},
	}
	balance := int64(100000)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 {
				r := h.query(t, acct.Key, tt.query, tt.vars)
				wantOK(t, r)
				if string(r.Data) != tt.want {
					t.Errorf("data %s, want %s", r.Data, tt.want)
				}
				balance--
				wantCredits(t, r, "pro", 1, balance)
			}
		})
	}
	r := h.query(t, acct.Key, `{ fail { __typename } hash(text: "hello") { __typename } }`, nil)
	if r.Status != http.StatusOK || len(r.Errors) != 1 || r.Errors[0].Code() != "API_ERROR" || len(r.Errors[0].Path) != 1 || r.Errors[0].Path[0] != "fail" {
		t.Fatalf("got %d %s, want 200 with an API_ERROR at [fail]", r.Status, r.Body)
	}
	if want := `{"fail":null,"hash":{"__typename":"HashResult"}}`; string(r.Data) != want {
		t.Errorf("data %s, want %s", r.Data, want)
	}
}
