package admin_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/redis"
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
func TestAnchoredPeriods(t *testing.T) { onEveryStore(t, anchoredPeriods) }

func anchoredPeriods(t *testing.T, stores tollgate.Stores) {
	jan31 := utc(2030, time.January, 31, 10)
	e := newPlansEnv(t, stores, jan31)

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

// planChange is the data of PATCH /admin/v1/accounts/{id}.
type planChange struct {
	Account     anchoredAccount `json:"account"`
	Balance     balanceJSON     `json:"balance"`
	Changed     bool            `json:"changed"`
	EffectiveAt *time.Time      `json:"effective_at"`
}

// changePlan changes an account's plan through the admin API and returns its data.
func (e *env) changePlan(id, body string) planChange {
	e.t.Helper()
	r := e.admin(http.MethodPatch, "/admin/v1/accounts/"+id, body)
	wantStatus(e.t, "change the plan of "+id+" with "+body, r, http.StatusOK)
	return data[planChange](e.t, r)
}

// spend makes n calls of hash with key, 15 seconds apart (the basic plan's rate limit
// allows one every 12 seconds), from the env's clock on.
func (e *env) spend(key string, n int) credits {
	e.t.Helper()
	var c credits
	for range n {
		c = e.call(key)
		e.clock.Advance(15 * time.Second)
	}
	return c
}

// planEntries returns the plan changes of an account's audit log, oldest first.
func (e *env) planEntries(id string) []map[string]any {
	e.t.Helper()
	r := e.admin(http.MethodGet, "/admin/v1/accounts/"+id+"/audit", "")
	wantStatus(e.t, "audit log", r, http.StatusOK)
	var out []map[string]any
	for _, entry := range data[struct {
		Entries []map[string]any `json:"entries"`
	}](e.t, r).Entries {
		if entry["action"] == string(audit.PlanChange) {
			out = append([]map[string]any{entry}, out...)
		}
	}
	return out
}

// wantPlanEntry checks an audit entry of a change of plan.
func wantPlanEntry(t *testing.T, entry map[string]any, from, to string, at time.Time) {
	t.Helper()
	before, _ := entry["before"].(map[string]any)
	after, _ := entry["after"].(map[string]any)
	if entry["actor"] != audit.Operator || before["plan"] != from || after["plan"] != to || after["effective_at"] != at.Format(time.RFC3339) {
		t.Errorf("audit entry %v: want the operator's change from %s to %s, effective at %s", entry, from, to, at.Format(time.RFC3339))
	}
}

// TestChangePlanNow: an upgrade is made now by default: the rest of the period gets
// the difference of the allowances, and the very next call (its key's record cached)
// is on the new plan: its headers, its rate limit. The renewal is the new plan's.
func TestChangePlanNow(t *testing.T) { onEveryStore(t, changePlanNow) }

func changePlanNow(t *testing.T, stores tollgate.Stores) {
	e := newPlansEnv(t, stores, t0)
	acct := e.createAccount(`{"id":"up","plan":"basic"}`)
	feb15 := t0.AddDate(0, 1, 0)
	wantCredits(t, "before", e.spend(acct.Value, 10), credits{"basic", 1, 90, 10, 100, feb15})

	e.clock.Set(t0.AddDate(0, 0, 5))
	c := e.changePlan("up", `{"plan":"pro"}`)
	if !c.Changed || c.EffectiveAt == nil || !c.EffectiveAt.Equal(e.clock.Now()) || c.Account.Plan != "pro" || c.Account.PendingPlan != nil {
		t.Errorf("upgrade: %+v, want the plan changed now", c)
	}
	if c.Balance.Remaining != 990 || c.Balance.Used != 10 || c.Balance.Limit != 1000 || !c.Balance.Renewal.Equal(feb15) {
		t.Errorf("balance after the upgrade %+v, want 990 remaining: 90 and the difference, 900", c.Balance)
	}
	r := e.rest(acct.Value, "hash", map[string]string{"text": "x"})
	wantStatus(t, "the next call", r, http.StatusOK)
	wantCredits(t, "the next call", creditHeaders(t, r), credits{"pro", 1, 989, 11, 1000, feb15})
	if got := r.header.Get(wire.HeaderRateLimit); got != "600" {
		t.Errorf("%s = %q on the next call, want the pro plan's 600", wire.HeaderRateLimit, got)
	}
	// The basic plan allowed 5 calls a minute; pro allows these at once.
	for range 10 {
		e.call(acct.Value)
	}

	// The same change again changes nothing, and is not recorded again.
	if c := e.changePlan("up", `{"plan":"pro"}`); c.Changed || c.EffectiveAt != nil || c.Balance.Remaining != 979 {
		t.Errorf("the same change again: %+v, want nothing changed", c)
	}
	entries := e.planEntries("up")
	if len(entries) != 1 {
		t.Fatalf("%d plan changes in the audit log, want 1: %v", len(entries), entries)
	}
	wantPlanEntry(t, entries[0], "basic", "pro", t0.AddDate(0, 0, 5))

	e.clock.Set(feb15)
	wantCredits(t, "the renewal", e.call(acct.Value), credits{"pro", 1, 999, 1, 1000, t0.AddDate(0, 2, 0)})
}

// TestChangePlanOnEveryInstance: a change made through one instance is in force on
// the next call through another that cached the account's record.
func TestChangePlanOnEveryInstance(t *testing.T) { onEveryStore(t, changePlanOnEveryInstance) }

func changePlanOnEveryInstance(t *testing.T, stores tollgate.Stores) {
	a, b := newPlansEnv(t, stores, t0), newPlansEnv(t, stores, t0)
	acct := a.createAccount(`{"id":"shared","plan":"basic"}`)
	wantCredits(t, "a call through the other instance", b.call(acct.Value), credits{"basic", 1, 99, 1, 100, t0.AddDate(0, 1, 0)})
	a.changePlan("shared", `{"plan":"pro"}`)
	r := b.rest(acct.Value, "hash", map[string]string{"text": "x"})
	wantStatus(t, "the next call through the other instance", r, http.StatusOK)
	wantCredits(t, "the next call through the other instance", creditHeaders(t, r), credits{"pro", 1, 998, 2, 1000, t0.AddDate(0, 1, 0)})
	if got := r.header.Get(wire.HeaderRateLimit); got != "600" {
		t.Errorf("%s = %q on the other instance, want the pro plan's 600", wire.HeaderRateLimit, got)
	}
}

// TestChangePlanAtRenewal: a downgrade waits for the renewal by default: nothing
// changes until the period's last instant, and from the renewal's on the new plan is in
// force with its allowance exactly, without anything rewriting the account's record. A
// later change replaces a pending one; a change back to the plan in force drops it.
func TestChangePlanAtRenewal(t *testing.T) { onEveryStore(t, changePlanAtRenewal) }

func changePlanAtRenewal(t *testing.T, stores tollgate.Stores) {
	e := newPlansEnv(t, stores, t0)
	acct := e.createAccount(`{"id":"down","plan":"pro"}`)
	feb15 := t0.AddDate(0, 1, 0)
	e.spend(acct.Value, 3)

	e.clock.Set(t0.AddDate(0, 0, 3))
	c := e.changePlan("down", `{"plan":"team","effective":"renewal"}`)
	if !c.Changed || c.Account.Plan != "pro" || c.Account.PendingPlan == nil || *c.Account.PendingPlan != "team" {
		t.Errorf("a change at the renewal: %+v", c)
	}
	c = e.changePlan("down", `{"plan":"basic"}`)
	if !c.Changed || c.EffectiveAt == nil || !c.EffectiveAt.Equal(feb15) || c.Account.Plan != "pro" ||
		c.Account.PendingPlan == nil || *c.Account.PendingPlan != "basic" || c.Account.PendingPlanAt == nil || !c.Account.PendingPlanAt.Equal(feb15) {
		t.Errorf("a downgrade: %+v, want basic pending until %s, replacing team", c, feb15)
	}
	if c.Balance.Remaining != 997 || c.Balance.Limit != 1000 {
		t.Errorf("balance after the downgrade %+v, want it unchanged", c.Balance)
	}
	if again := e.changePlan("down", `{"plan":"basic","effective":"renewal"}`); again.Changed {
		t.Errorf("the pending change again: %+v, want nothing changed", again)
	}

	e.clock.Set(feb15.Add(-time.Second))
	r := e.rest(acct.Value, "hash", map[string]string{"text": "x"})
	wantCredits(t, "the period's last second", creditHeaders(t, r), credits{"pro", 1, 996, 4, 1000, feb15})
	if got := r.header.Get(wire.HeaderRateLimit); got != "600" {
		t.Errorf("%s = %q before the renewal, want pro's 600", wire.HeaderRateLimit, got)
	}
	e.clock.Set(feb15)
	r = e.rest(acct.Value, "hash", map[string]string{"text": "x"})
	wantCredits(t, "the renewal", creditHeaders(t, r), credits{"basic", 1, 99, 1, 100, t0.AddDate(0, 2, 0)})
	if got := r.header.Get(wire.HeaderRateLimit); got != "5" {
		t.Errorf("%s = %q from the renewal, want basic's 5", wire.HeaderRateLimit, got)
	}
	if a, b := e.billingOf("down"); a.Plan != "basic" || a.PendingPlan != nil || a.PendingPlanAt != nil || b.Limit != 100 {
		t.Errorf("the account after the renewal: %+v, %+v; want basic, nothing pending", a, b)
	}
	entries := e.planEntries("down")
	if len(entries) != 2 {
		t.Fatalf("%d plan changes in the audit log, want 2: %v", len(entries), entries)
	}
	wantPlanEntry(t, entries[0], "pro", "team", feb15)
	wantPlanEntry(t, entries[1], "pro", "basic", feb15)

	// A change back to the plan in force drops a pending one.
	e.changePlan("down", `{"plan":"pro","effective":"renewal"}`)
	c = e.changePlan("down", `{"plan":"basic"}`)
	if !c.Changed || c.Account.Plan != "basic" || c.Account.PendingPlan != nil {
		t.Errorf("a change back to the plan in force: %+v, want the pending change dropped", c)
	}
	e.clock.Set(t0.AddDate(0, 2, 0))
	wantCredits(t, "the next renewal", e.call(acct.Value), credits{"basic", 1, 99, 1, 100, t0.AddDate(0, 3, 0)})
}

// TestChangePlanDowngradeNow: a downgrade made now takes the difference from what is
// left of the allowance, never below zero, and never from granted credits.
func TestChangePlanDowngradeNow(t *testing.T) { onEveryStore(t, changePlanDowngradeNow) }

func changePlanDowngradeNow(t *testing.T, stores tollgate.Stores) {
	e := newPlansEnv(t, stores, t0)
	acct := e.createAccount(`{"id":"now","plan":"pro"}`)
	feb15 := t0.AddDate(0, 1, 0)
	r := e.admin(http.MethodPost, "/admin/v1/accounts/now/credits", `{"amount":-850,"reason":"spent"}`)
	wantStatus(t, "take 850", r, http.StatusOK)
	r = e.admin(http.MethodPost, "/admin/v1/accounts/now/credits", `{"amount":30,"reason":"top-up"}`)
	wantStatus(t, "grant 30", r, http.StatusOK)
	wantCredits(t, "before", e.call(acct.Value), credits{"pro", 1, 179, 1, 1000, feb15})

	c := e.changePlan("now", `{"plan":"basic","effective":"now"}`)
	if !c.Changed || c.Account.Plan != "basic" || c.Balance.Remaining != 30 || c.Balance.Limit != 100 {
		t.Errorf("downgrade now: %+v, want basic with the 30 granted credits left", c)
	}
	wantCredits(t, "the next call", e.call(acct.Value), credits{"basic", 1, 29, 2, 100, feb15})
	e.clock.Set(feb15)
	wantCredits(t, "the renewal", e.call(acct.Value), credits{"basic", 1, 128, 1, 100, t0.AddDate(0, 2, 0)})
}

// TestChangePlanCycle: a change now between plans that renew on different cycles
// begins a new period now, on the new plan's allowance; at the renewal, the new plan's
// periods are counted from it.
func TestChangePlanCycle(t *testing.T) { onEveryStore(t, changePlanCycle) }

func changePlanCycle(t *testing.T, stores tollgate.Stores) {
	e := newPlansEnv(t, stores, t0)
	acct := e.createAccount(`{"id":"cycle","plan":"pro"}`)
	e.spend(acct.Value, 5)

	mar3 := utc(2030, time.March, 3, 8)
	e.clock.Set(mar3)
	c := e.changePlan("cycle", `{"plan":"team"}`)
	if !c.Changed || c.Account.BillingAnchor == nil || !c.Account.BillingAnchor.Equal(mar3) || c.Balance.Remaining != 12000 || !c.Balance.Renewal.Equal(mar3.AddDate(1, 0, 0)) {
		t.Errorf("monthly to yearly now: %+v, want a year's period from now and its allowance", c)
	}
	wantCredits(t, "the next call", e.call(acct.Value), credits{"team", 1, 11999, 1, 12000, mar3.AddDate(1, 0, 0)})

	// Back to monthly: a downgrade, at the renewal; the months are counted from it.
	c = e.changePlan("cycle", `{"plan":"pro"}`)
	if c.EffectiveAt == nil || !c.EffectiveAt.Equal(mar3.AddDate(1, 0, 0)) {
		t.Errorf("yearly to monthly: %+v, want it at the renewal", c)
	}
	e.clock.Set(mar3.AddDate(1, 0, 0).Add(-time.Hour))
	wantCredits(t, "the last hour of the year", e.call(acct.Value), credits{"team", 1, 11998, 2, 12000, mar3.AddDate(1, 0, 0)})
	e.clock.Set(mar3.AddDate(1, 0, 0))
	wantCredits(t, "the renewal", e.call(acct.Value), credits{"pro", 1, 999, 1, 1000, mar3.AddDate(1, 1, 0)})
}

// TestChangePlanRefused: an unknown plan or effective, a missing plan, an unknown or
// closed account.
func TestChangePlanRefused(t *testing.T) { onEveryStore(t, changePlanRefused) }

func changePlanRefused(t *testing.T, stores tollgate.Stores) {
	e := newPlansEnv(t, stores, t0)
	e.createAccount(`{"id":"acct","plan":"basic"}`)
	for _, tt := range []struct {
		name, id, body string
		status         int
		want           string
	}{
		{"unknown plan", "acct", `{"plan":"gold"}`, http.StatusBadRequest, `plan "gold" does not exist; the plans are [basic pro team]`},
		{"no plan", "acct", `{"effective":"now"}`, http.StatusBadRequest, "plan is required"},
		{"unknown effective", "acct", `{"plan":"pro","effective":"tomorrow"}`, http.StatusBadRequest, `effective must be "now" or "renewal"`},
		{"unknown field", "acct", `{"plan":"pro","when":"now"}`, http.StatusBadRequest, `unknown field "when"`},
		{"unknown account", "nobody", `{"plan":"pro"}`, http.StatusNotFound, `no account has the id "nobody"`},
	} {
		r := e.admin(http.MethodPatch, "/admin/v1/accounts/"+tt.id, tt.body)
		wantError(t, tt.name, r, tt.status, tt.want)
	}
	keys := e.svc.Stores().Keys
	a, err := keys.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	u := a.Update()
	u.State, u.StateChangedAt = auth.AccountClosed, e.clock.Now()
	if _, err := keys.UpdateAccount(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	r := e.admin(http.MethodPatch, "/admin/v1/accounts/acct", `{"plan":"pro"}`)
	wantError(t, "a closed account", r, http.StatusConflict, `account "acct" is closed`)
	if entries := e.planEntries("acct"); len(entries) != 0 {
		t.Errorf("refused changes in the audit log: %v", entries)
	}
}

// TestPlanMonthWalk follows one account through a month of simulated time, on each
// store: calls on its allowance, a grant, an upgrade now, a downgrade now, a
// suspension, a change to wait for the renewal, and the renewal. At every step its balance, as the admin API
// reads it from the ledger, is the period's allowance (as the changes of plan left it)
// plus the credits granted less the credits charged; the walk is logged as a table.
func TestPlanMonthWalk(t *testing.T) { onEveryStore(t, monthWalk) }

// onEveryStore runs test on memory stores, and on PostgreSQL and on Redis with the
// test variables that name their servers.
func onEveryStore(t *testing.T, test func(t *testing.T, stores tollgate.Stores)) {
	for _, s := range []struct {
		name   string
		stores func(t *testing.T) tollgate.Stores
	}{
		{"memory", func(*testing.T) tollgate.Stores {
			return tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
				Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
		}},
		{"postgres", postgresStores},
		{"redis", redisStores},
	} {
		t.Run(s.name, func(t *testing.T) { test(t, s.stores(t)) })
	}
}

// postgresStores returns every store on PostgreSQL (TOLLGATE_TEST_POSTGRES), in a
// schema of the test's.
func postgresStores(t *testing.T) tollgate.Stores {
	dsn := testenv.Var(t, testenv.Postgres)
	pool := testenv.PostgresPool(t, dsn, testenv.PostgresSchema(t, dsn), 8)
	if err := postgres.Migrate(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
}

// redisStores returns every store on Redis (TOLLGATE_TEST_REDIS), under a prefix of
// the test's, on the caller's clock (the walk moves it).
func redisStores(t *testing.T) tollgate.Stores {
	c := testenv.RedisClient(t, testenv.Var(t, testenv.Redis))
	s, err := redis.New(c, &redis.Options{Prefix: testenv.RedisPrefix(t, c), CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	return tollgate.Stores{Keys: s, Ledger: s, Rates: s, Slots: s}
}

func monthWalk(t *testing.T, stores tollgate.Stores) {
	start := utc(2030, time.March, 1, 9)
	e := newPlansEnv(t, stores, start)
	// The model: the period's allowance, the credits granted and those charged.
	var (
		plan                            = "basic"
		allowance, granted, spent int64 = 100, 0, 0
		rows                            = []string{fmt.Sprintf("%-13s %-36s %-6s %9s %7s %7s %8s | %7s %15s %12s %5s  %s",
			"at", "step", "plan", "allowance", "granted", "charged", "expected", "balance", "allowance left", "grants left", "used", "renewal")}
	)
	acct := e.createAccount(`{"id":"walk","plan":"basic"}`)
	check := func(step string) {
		t.Helper()
		a, b := e.billingOf("walk")
		want := allowance + granted - spent
		// Calls spend the allowance first, then the grants.
		grantsLeft := granted - max(spent-allowance, 0)
		rows = append(rows, fmt.Sprintf("%-13s %-36s %-6s %9d %7d %7d %8d | %7d %15d %12d %5d  %s", e.clock.Now().Format("Jan 02 15:04"), step, a.Plan,
			allowance, granted, spent, want, b.Remaining, b.AllowanceRemaining, b.Granted, b.Used, b.Renewal.Format("Jan 02 15:04")))
		if a.Plan != plan || b.Remaining != want || b.Used != spent || b.Granted != grantsLeft || b.AllowanceRemaining != want-grantsLeft {
			t.Errorf("%s: plan %s, balance %+v; want plan %s, %d remaining (%d + %d - %d), %d of them granted, %d used",
				step, a.Plan, b, plan, want, allowance, granted, spent, grantsLeft, spent)
		}
	}
	day := func(d int) { e.clock.Set(start.AddDate(0, 0, d)) }
	calls := func(n int) {
		e.spend(acct.Value, n)
		spent += int64(n)
		check(fmt.Sprintf("%d calls", n))
	}
	check("created on basic")
	calls(20)

	day(2)
	r := e.admin(http.MethodPost, "/admin/v1/accounts/walk/credits", `{"amount":50,"reason":"top-up"}`)
	wantStatus(t, "top-up", r, http.StatusOK)
	granted += 50
	check("top-up grant of 50")
	calls(30)

	day(5)
	e.changePlan("walk", `{"plan":"pro"}`)
	plan, allowance = "pro", allowance+900
	check("upgrade to pro now (+900)")
	calls(120)

	day(12)
	e.changePlan("walk", `{"plan":"basic","effective":"now"}`)
	// The difference, 900, is taken from what is left of the allowance only.
	taken := min(900, max(allowance-spent, 0))
	plan, allowance = "basic", allowance-taken
	check(fmt.Sprintf("downgrade to basic now (-%d)", taken))
	calls(20)

	day(16)
	r = e.admin(http.MethodPost, "/admin/v1/accounts/walk/suspend", `{"reason":"unpaid invoice"}`)
	wantStatus(t, "suspend", r, http.StatusOK)
	if r := e.rest(acct.Value, "hash", map[string]string{"text": "x"}); r.status != http.StatusForbidden || r.header.Get(wire.HeaderErrorCode) != "account_suspended" {
		t.Errorf("a call of the suspended account: %d %q, want 403 account_suspended", r.status, r.header.Get(wire.HeaderErrorCode))
	}
	check("suspended: a call refused")
	day(17)
	r = e.admin(http.MethodPost, "/admin/v1/accounts/walk/reactivate", `{"reason":"paid"}`)
	wantStatus(t, "reactivate", r, http.StatusOK)
	check("reactivated")

	day(20)
	c := e.changePlan("walk", `{"plan":"pro","effective":"renewal"}`)
	if c.EffectiveAt == nil || !c.EffectiveAt.Equal(utc(2030, time.April, 1, 9)) {
		t.Errorf("the change at the renewal takes effect at %v, want April 1 09:00", c.EffectiveAt)
	}
	check("pro from the renewal")
	calls(10)

	e.clock.Set(utc(2030, time.April, 1, 9).Add(-time.Minute))
	check("the period's last minute")
	e.clock.Set(utc(2030, time.April, 1, 9))
	// The renewal: the allowance is pro's, the grants left carry over.
	granted -= max(spent-allowance, 0)
	plan, allowance, spent = "pro", 1000, 0
	check("renewal on April 1")
	calls(5)

	t.Log("the walk of account walk (left: the model; right: the ledger, through the admin API):\n" + strings.Join(rows, "\n"))
}
