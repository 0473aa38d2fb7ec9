package gql_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/store/memory"
)

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestCost: a query costs the sum of the REST costs of its distinct APIs, checked on
// the headers and on the balance read through the Service; the runs are counted.
func TestCost(t *testing.T) {
	tests := []struct {
		name  string
		query string
		cost  int64
		runs  map[string]int
	}{
		{"three different 1-credit APIs", threeAPIs, 3, map[string]int{"hash": 1, "uuid-generator": 1, "echo": 1}},
		{"the same API twice, same arguments: once", `{ a: hash(text: "x") { hash } b: hash(text: "x") { hash } }`, 1, map[string]int{"hash": 1}},
		{"the same arguments, one given by its default: once", `{ a: hash(text: "x") { hash } b: hash(text: "x", algorithm: sha256) { algorithm } }`, 1, map[string]int{"hash": 1}},
		{"a 3-credit API and a 1-credit API", `{ costly { ok } hash(text: "x") { hash } }`, 4, map[string]int{"costly": 1, "hash": 1}},
		{"__typename beside an API", `{ __typename hash(text: "x") { hash __typename } }`, 1, map[string]int{"hash": 1}},
		{"a call the API judges wrong is charged", `{ dateinfo(date: "2026-02-30") { date } }`, 1, map[string]int{"date-info": 1}},
		{"a failing call is refunded", `{ fail { never } }`, 0, map[string]int{"fail": 1}},
		{"a failing call beside a good one", `{ fail { never } hash(text: "x") { hash } }`, 1, map[string]int{"fail": 1, "hash": 1}},
		{"the introspection query", "", 0, nil},
		{"{ __typename }", `{ __typename }`, 0, nil},
		{"__type", `{ __type(name: "HashResult") { name } }`, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, config{})
			acct := h.newAccount(t, "pro", 100)
			q := tt.query
			if q == "" {
				q = introspectionQuery(t)
			}
			r := h.query(t, acct.Key, q, nil)
			if r.Status != http.StatusOK || !r.HasData {
				t.Fatalf("got %d %s", r.Status, truncate(r.Body))
			}
			wantCredits(t, r, "pro", tt.cost, 100-tt.cost)
			if got := h.balance(t, acct.ID); got != 100-tt.cost {
				t.Errorf("balance %d, want %d", got, 100-tt.cost)
			}
			total := 0
			for id, n := range tt.runs {
				total += n
				if got := h.runs.get(id); got != n {
					t.Errorf("%s ran %d times, want %d", id, got, n)
				}
			}
			if got := h.runs.total(); got != total {
				t.Errorf("%d runs in all, want %d", got, total)
			}
		})
	}
}

// TestAliasesShareOneRun: the same call under two aliases runs once and both aliases
// get its result, shaped by their own selections.
func TestAliasesShareOneRun(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	data := wantOK(t, h.query(t, acct.Key, `{ a: uuidgenerator(count: 2) { uuids } b: uuidgenerator(count: 2) { uuids count } }`, nil))
	a, b := field(t, data, "a", "uuids").([]any), field(t, data, "b", "uuids").([]any)
	if len(a) != 2 || len(b) != 2 || a[0] != b[0] || a[1] != b[1] {
		t.Errorf("the aliases got different runs: %v %v", a, b)
	}
	if _, ok := data["a"].(map[string]any)["count"]; ok {
		t.Error("alias a has a field it did not select")
	}
	if got := h.runs.get("uuid-generator"); got != 1 {
		t.Errorf("uuid-generator ran %d times", got)
	}
}

// TestParallel checks that the APIs of one query run in parallel. Three copies of the
// echo API each wait, in their handler, until all three have started, and only then
// echo after their delay of 300 ms: the query completes only if they run at once (run
// one after the other, the first would wait for the others until the call's timeout and
// the query would fail). It runs in a synctest bubble, where that wait is decided
// without the wall clock, and the three delays take exactly 300 ms of the bubble's
// time, not 900.
func TestParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := &barrier{waiting: 3, met: make(chan struct{})}
		echoAs := func(id string) catalog.API {
			a := apis.Echo()
			a.ID = id
			next := a.Handler
			a.Handler = catalog.HandlerFunc(func(ctx context.Context, req *catalog.Request) (any, error) {
				if err := all.meet(ctx); err != nil {
					return nil, err
				}
				return next.ServeAPI(ctx, req)
			})
			return a
		}
		h := newHarness(t, config{sampleOnly: true, extra: []catalog.API{echoAs("echo-a"), echoAs("echo-b"), echoAs("echo-c")}})
		acct := h.newAccount(t, "pro", -1)
		const q = `{ a: echoa(message: "a", delay_ms: 300) { message delay_ms } b: echob(message: "b", delay_ms: 300) { message } c: echoc(message: "c", delay_ms: 300) { message } }`
		start := time.Now()
		r := h.query(t, acct.Key, q, nil)
		elapsed := time.Since(start) // the bubble's time: only the handlers' delays move it
		data := wantOK(t, r)
		for _, k := range []string{"a", "b", "c"} {
			if got := field(t, data, k, "message"); got != k {
				t.Errorf("%s.message = %v", k, got)
			}
		}
		if got := field(t, data, "a", "delay_ms"); got != jsonNumber("300") {
			t.Errorf("a.delay_ms = %v", got)
		}
		for _, id := range []string{"echo-a", "echo-b", "echo-c"} {
			if got := h.runs.get(id); got != 1 {
				t.Errorf("%s ran %d times, want 1", id, got)
			}
		}
		wantCredits(t, r, "pro", 3, 100000-3)
		if elapsed != 300*time.Millisecond {
			t.Errorf("three calls of 300 ms took %v of the bubble's time, want 300 ms: they ran in parallel, after meeting", elapsed)
		}
	})
}

// A barrier lets handlers go on only once a number of them have arrived.
type barrier struct {
	mu      sync.Mutex
	waiting int
	met     chan struct{}
}

// meet waits until every handler has arrived, or ctx ends.
func (b *barrier) meet(ctx context.Context) error {
	b.mu.Lock()
	if b.waiting--; b.waiting == 0 {
		close(b.met)
	}
	b.mu.Unlock()
	select {
	case <-b.met:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestPartialFailure: date-info judging 2026-02-30 beside a good hash: 200 with data
// for hash, null and an error for dateinfo (path, BAD_USER_INPUT), with either media
// type; both calls are charged, since the API judged the input.
func TestPartialFailure(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro", -1)
	balance := int64(100000)
	for _, media := range []string{mediaGraphQL, mediaJSON} {
		r := h.query(t, acct.Key, `{ dateinfo(date: "2026-02-30") { date day_of_week } hash(text: "hello") { hash } }`, nil, accept(media))
		if r.Status != http.StatusOK || !r.HasData || len(r.Errors) != 1 {
			t.Fatalf("got %d %s, want 200 with data and one error", r.Status, r.Body)
		}
		data := r.DataMap(t)
		if got := field(t, data, "hash", "hash"); got != helloSHA256 {
			t.Errorf("hash = %v", got)
		}
		if v, ok := data["dateinfo"]; !ok || v != nil {
			t.Errorf("dateinfo = %v, want null", v)
		}
		e := r.Errors[0]
		if e.Code() != "BAD_USER_INPUT" || len(e.Path) != 1 || e.Path[0] != "dateinfo" || !strings.Contains(e.Message, "2026-02-30") {
			t.Errorf("error %+v", e)
		}
		balance -= 2
		wantCredits(t, r, "pro", 2, balance)
	}
	if got := h.balance(t, acct.ID); got != balance {
		t.Errorf("balance %d, want %d", got, balance)
	}
}

// TestDateInfoNaming: the result fields of date-info under the GraphQL naming rules,
// with their exact values for 2024-02-29.
func TestDateInfoNaming(t *testing.T) {
	h := newHarness(t, config{sampleOnly: true})
	acct := h.newAccount(t, "pro", -1)
	r := h.query(t, acct.Key, `{ dateinfo(date: "2024-02-29") { date day_of_week iso_week unix_seconds quarter_year _1st_of_month isleapyear __typename } }`, nil)
	wantOK(t, r)
	const want = `{"dateinfo":{"date":"2024-02-29","day_of_week":"Thursday","iso_week":9,"unix_seconds":1709164800,"quarter_year":"Q1/2024","_1st_of_month":"2024-02-01","isleapyear":true,"__typename":"DateinfoResult"}}`
	if string(r.Data) != want {
		t.Errorf("data\n %s\nwant\n %s", r.Data, want)
	}
	// The REST names are not GraphQL fields.
	for _, q := range []string{`{ dateinfo(date: "2024-02-29") { dayofweek } }`, `{ dateinfo(date: "2024-02-29") { is_leap_year } }`, `{ dateinfo(date: "2024-02-29") { _1stofmonth } }`} {
		wantError(t, h.query(t, acct.Key, q, nil), http.StatusBadRequest, "GRAPHQL_VALIDATION_FAILED")
	}
	// A year that is not a leap year, in another quarter.
	data := wantOK(t, h.query(t, acct.Key, `{ dateinfo(date: "2100-12-31") { day_of_week isleapyear quarter_year iso_week unix_seconds } }`, nil))
	if got := data["dateinfo"].(map[string]any); got["isleapyear"] != false || got["quarter_year"] != "Q4/2100" || got["day_of_week"] != "Friday" ||
		got["iso_week"] != jsonNumber("52") || got["unix_seconds"] != jsonNumber("4133894400") {
		t.Errorf("dateinfo(2100-12-31) = %v", got)
	}
}

// TestAliasesOfOneAPI: an API named several times (aliases, fragments) with the same
// arguments runs once and costs once, however the arguments are written; with
// different arguments the query is refused, 400 BAD_USER_INPUT naming the API, before
// anything runs or is charged. Skipped fields do not count.
func TestAliasesOfOneAPI(t *testing.T) {
	same := []struct {
		name, query string
		vars        map[string]any
	}{
		{"twice", `{ a: hash(text: "x") { hash } b: hash(text: "x") { algorithm } }`, nil},
		{"argument order", `{ a: hash(text: "x", algorithm: md5) { hash } b: hash(algorithm: md5, text: "x") { hash } }`, nil},
		{"a default given", `{ a: hash(text: "x") { hash } b: hash(text: "x", algorithm: sha256) { hash } }`, nil},
		{"a variable", `query($t: String!) { a: hash(text: $t) { hash } b: hash(text: "x") { hash } }`, map[string]any{"t": "x"}},
		{"a variable's default", `query($t: String = "x") { a: hash(text: $t) { hash } b: hash(text: "x") { hash } }`, nil},
		{"an enum by variable", `query($a: HashAlgorithm) { a: hash(text: "x", algorithm: $a) { hash } b: hash(text: "x", algorithm: md5) { hash } }`, map[string]any{"a": "md5"}},
		{"a block string", `{ a: hash(text: """x""") { hash } b: hash(text: "x") { hash } }`, nil},
		{"a fragment", `fragment F on Query { b: hash(text: "x") { hash } } { a: hash(text: "x") { hash } ...F }`, nil},
		{"an inline fragment", `{ a: hash(text: "x") { hash } ... on Query { b: hash(text: "x") { algorithm } } }`, nil},
		{"an integer", `query($n: Int) { a: uuidgenerator(count: 2) { count } b: uuidgenerator(count: $n) { count } }`, map[string]any{"n": 2}},
		{"ten times", `{ hash(text: "x") { hash }` + aliases(9, `hash(text: "x") { hash }`) + ` }`, nil},
		{"the other arguments skipped", `{ a: hash(text: "x") { hash } b: hash(text: "y") @skip(if: true) { hash } }`, nil},
		{"the other arguments not included", `query($i: Boolean!) { a: hash(text: "x") { hash } b: hash(text: "y") @include(if: $i) { hash } }`, map[string]any{"i": false}},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			h := newHarness(t, config{})
			acct := h.newAccount(t, "pro", 100)
			r := h.query(t, acct.Key, tt.query, tt.vars)
			wantOK(t, r)
			wantCredits(t, r, "pro", 1, 99)
			if got := h.runs.total(); got != 1 {
				t.Errorf("%d runs, want 1", got)
			}
		})
	}
	other := []struct {
		name, query, api string
		vars             map[string]any
	}{
		{"literals", `{ a: hash(text: "a") { hash } b: hash(text: "b") { hash } c: hash(text: "c") { hash } }`, "hash", nil},
		{"a default overridden", `{ a: hash(text: "x") { hash } b: hash(text: "x", algorithm: md5) { hash } }`, "hash", nil},
		{"a variable", `query($t: String!) { a: hash(text: $t) { hash } b: hash(text: "x") { hash } }`, "hash", map[string]any{"t": "y"}},
		{"a fragment", `fragment F on Query { b: dateinfo(date: "2024-01-01") { date } } { a: dateinfo(date: "2024-01-02") { date } ...F }`, "dateinfo", nil},
		{"included", `query($i: Boolean!) { a: hash(text: "x") { hash } b: hash(text: "y") @include(if: $i) { hash } }`, "hash", map[string]any{"i": true}},
		{"beside another API", `{ echo(message: "m") { message } a: uuidgenerator(count: 1) { count } b: uuidgenerator(count: 2) { count } }`, "uuidgenerator", nil},
		{"ten slow calls for the price of one", `{` + aliasesOf(10, func(i int) string {
			return `echo(message: "` + strconv.Itoa(i) + `", delay_ms: 5000) { message }`
		}) + ` }`, "echo", nil},
	}
	for _, tt := range other {
		t.Run("other/"+tt.name, func(t *testing.T) {
			h := newHarness(t, config{})
			acct := h.newAccount(t, "pro", 100)
			for _, media := range []string{mediaGraphQL, mediaJSON} {
				r := h.query(t, acct.Key, tt.query, tt.vars, accept(media))
				wantGatewayError(t, r, http.StatusBadRequest, "BAD_USER_INPUT", tt.api, "different arguments", "once per query")
				wantCredits(t, r, "pro", 0, 100)
			}
			if got := h.runs.total(); got != 0 {
				t.Errorf("%d runs, want none", got)
			}
		})
	}
}

// TestAliasesOneSlot: aliases of one API are one call, which takes one concurrency
// slot; the API runs once and every alias gets its result.
func TestAliasesOneSlot(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "solo", -1) // one call at a time, 100 credits
	first := h.goQuery(t, acct.Key, `{ a: block { released } b: block { released } }`)
	h.block.WaitEntered(t)
	if n, err := h.stores.Slots.(*memory.ConcurrencyLimiter).InUse(t.Context(), acct.ID, h.clock.Now()); err != nil || n != 1 {
		t.Errorf("%d slots in use (%v), want 1", n, err)
	}
	h.block.Release()
	r := <-first
	if r.Status != http.StatusOK || string(r.Data) != `{"a":{"released":true},"b":{"released":true}}` {
		t.Errorf("the query: %d %s", r.Status, r.Body)
	}
	wantCredits(t, r, "solo", 1, 99)
	if got := h.runs.get("block"); got != 1 {
		t.Errorf("block ran %d times, want 1", got)
	}
}

// aliases returns n aliased copies of a root field, named a0, a1...
func aliases(n int, field string) string {
	return aliasesOf(n, func(int) string { return field })
}

// aliasesOf returns n aliased root fields, named a0, a1..., field(i) the i-th.
func aliasesOf(n int, field func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(" a" + strconv.Itoa(i) + ": " + field(i))
	}
	return b.String()
}
