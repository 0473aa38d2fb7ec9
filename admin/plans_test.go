package admin_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/wire"
)

// periodPlans are the plans of the tests of billing periods and changes of plan:
// "basic" and "pro" renew monthly, "team" yearly.
var periodPlans = []billing.Plan{
	{Name: "basic", Credits: 100, RatePerMinute: 5, Concurrency: 1},
	{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10},
	{Name: "team", Credits: 12000, RatePerMinute: 6000, Concurrency: 20, Renews: billing.Yearly},
}

// newPlansEnv returns an env on the stores (fresh memory stores if zero) with
// periodPlans and a key cache (so that a change of plan must reach cached records), its
// clock at start.
func newPlansEnv(t *testing.T, stores tollgate.Stores, start time.Time) *env {
	t.Helper()
	return newEnvOf(t, envConfig{plans: periodPlans, stores: stores, keyCache: &auth.KeyCacheOptions{}, start: start})
}

// credits are the credit headers of a call.
type credits struct {
	plan                         string
	cost, remaining, used, limit int64
	renewal                      time.Time
}

// creditHeaders reads the credit headers of a call's answer.
func creditHeaders(t *testing.T, r response) credits {
	t.Helper()
	num := func(name string) int64 {
		n, err := strconv.ParseInt(r.header.Get(name), 10, 64)
		if err != nil {
			t.Fatalf("%s = %q: %v\n%s", name, r.header.Get(name), err, r.body)
		}
		return n
	}
	renewal, err := time.Parse(time.RFC3339, r.header.Get(wire.HeaderCreditsRenewal))
	if err != nil {
		t.Fatalf("%s = %q: %v", wire.HeaderCreditsRenewal, r.header.Get(wire.HeaderCreditsRenewal), err)
	}
	return credits{plan: r.header.Get(wire.HeaderPlan), cost: num(wire.HeaderCreditsCost), remaining: num(wire.HeaderCreditsRemaining),
		used: num(wire.HeaderCreditsUsed), limit: num(wire.HeaderCreditsLimit), renewal: renewal.UTC()}
}

// call calls hash with key at the env's clock and returns its credit headers, failing
// the test unless it succeeded.
func (e *env) call(key string) credits {
	e.t.Helper()
	r := e.rest(key, "hash", map[string]string{"text": "x"})
	if r.status != http.StatusOK {
		e.t.Fatalf("a call at %s: %d\n%s", e.clock.Now().Format(time.RFC3339), r.status, r.body)
	}
	return creditHeaders(e.t, r)
}

// wantCredits compares a call's credit headers.
func wantCredits(t *testing.T, what string, got, want credits) {
	t.Helper()
	if got.plan != want.plan || got.cost != want.cost || got.remaining != want.remaining || got.used != want.used ||
		got.limit != want.limit || !got.renewal.Equal(want.renewal) {
		t.Errorf("%s: credit headers %+v, want %+v", what, got, want)
	}
}

// anchoredAccount is data.account with the fields of billing.
type anchoredAccount struct {
	ID            string     `json:"id"`
	Plan          string     `json:"plan"`
	BillingAnchor *time.Time `json:"billing_anchor"`
	PendingPlan   *string    `json:"pending_plan"`
	PendingPlanAt *time.Time `json:"pending_plan_at"`
}

// billingOf reads an account's billing fields and balance through the admin API.
func (e *env) billingOf(id string) (anchoredAccount, balanceJSON) {
	e.t.Helper()
	r := e.admin(http.MethodGet, "/admin/v1/accounts/"+id, "")
	wantStatus(e.t, "get account "+id, r, http.StatusOK)
	d := data[struct {
		Account anchoredAccount `json:"account"`
		Balance balanceJSON     `json:"balance"`
	}](e.t, r)
	return d.Account, d.Balance
}

func utc(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }

// TestAnchoredPeriods: an account's periods are counted from its billing anchor, its
// creation by default: created on January 31, it renews on February 28, then March 31,
// April 30; on a yearly plan, a year after; with an anchor on the 1st, on the 1st.
func TestAnchoredPeriods(t *testing.T) {
	jan31 := utc(2030, time.January, 31, 10)
	e := newPlansEnv(t, tollgate.Stores{}, jan31)

	monthly := e.createAccount(`{"id":"monthly","plan":"basic"}`)
	if a, _ := e.billingOf("monthly"); a.BillingAnchor == nil || !a.BillingAnchor.Equal(jan31) || a.PendingPlan != nil || a.PendingPlanAt != nil {
		t.Errorf("account %+v: want the creation as its billing anchor, nothing pending", a)
	}
	wantCredits(t, "the first call", e.call(monthly.Value), credits{"basic", 1, 99, 1, 100, utc(2030, time.February, 28, 10)})
	e.clock.Set(utc(2030, time.February, 28, 10).Add(-time.Second))
	wantCredits(t, "the last second of the first period", e.call(monthly.Value), credits{"basic", 1, 98, 2, 100, utc(2030, time.February, 28, 10)})
	e.clock.Set(utc(2030, time.February, 28, 10))
	wantCredits(t, "the renewal on February 28", e.call(monthly.Value), credits{"basic", 1, 99, 1, 100, utc(2030, time.March, 31, 10)})
	e.clock.Set(utc(2030, time.March, 31, 10))
	wantCredits(t, "the renewal on March 31", e.call(monthly.Value), credits{"basic", 1, 99, 1, 100, utc(2030, time.April, 30, 10)})
	if _, b := e.billingOf("monthly"); b.Remaining != 99 || b.Used != 1 || b.Limit != 100 || !b.Renewal.Equal(utc(2030, time.April, 30, 10)) {
		t.Errorf("balance %+v, want 99 remaining until April 30", b)
	}

	e.clock.Set(jan31)
	yearly := e.createAccount(`{"id":"yearly","plan":"team"}`)
	wantCredits(t, "a yearly plan", e.call(yearly.Value), credits{"team", 1, 11999, 1, 12000, utc(2031, time.January, 31, 10)})
	e.clock.Set(utc(2031, time.January, 31, 10))
	wantCredits(t, "a yearly renewal", e.call(yearly.Value), credits{"team", 1, 11999, 1, 12000, utc(2032, time.January, 31, 10)})

	// An anchor on the 1st, a day ahead of the creation: the first period ends at it.
	e.clock.Set(jan31)
	first := e.createAccount(`{"id":"first","plan":"basic","billing_anchor":"2030-02-01T00:00:00Z"}`)
	wantCredits(t, "an anchor on the 1st", e.call(first.Value), credits{"basic", 1, 99, 1, 100, utc(2030, time.February, 1, 0)})
	e.clock.Set(utc(2030, time.February, 1, 0))
	wantCredits(t, "renewed on the 1st", e.call(first.Value), credits{"basic", 1, 99, 1, 100, utc(2030, time.March, 1, 0)})
	if a, _ := e.billingOf("first"); a.BillingAnchor == nil || !a.BillingAnchor.Equal(utc(2030, time.February, 1, 0)) {
		t.Errorf("account %+v: want the anchor given", a)
	}

	// Seeding again with the same anchor is the same account; with another, a conflict.
	r := e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"first","plan":"basic","billing_anchor":"2030-02-01T00:00:00Z"}`)
	wantStatus(t, "the same account again", r, http.StatusOK)
	r = e.admin(http.MethodPost, "/admin/v1/accounts", `{"id":"first","plan":"basic","billing_anchor":"2030-02-02T00:00:00Z"}`)
	wantError(t, "another anchor", r, http.StatusConflict, "its billing anchor is 2030-02-01T00:00:00Z, not 2030-02-02T00:00:00Z")

	for _, tt := range []struct{ name, anchor, want string }{
		{"before 1970", `"1969-12-31T23:59:59Z"`, "billing_anchor 1969-12-31T23:59:59Z is out of range"},
		{"more than a year ahead", `"2031-02-01T00:00:01Z"`, "billing_anchor 2031-02-01T00:00:01Z is out of range"},
		{"not a time", `"next month"`, "billing_anchor"},
	} {
		r := e.admin(http.MethodPost, "/admin/v1/accounts", `{"plan":"basic","billing_anchor":`+tt.anchor+`}`)
		wantError(t, tt.name, r, http.StatusBadRequest, tt.want)
	}
}
