package accounts_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// Manager.UsageTotals is the operator's read of usage across accounts: here the
// accounts ranked by the credits they spent today, and the errors per API.
func ExampleManager_UsageTotals() {
	ctx := context.Background()
	now := time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)
	svc, mgr, rec := usageExample(now) // the sample catalog on memory stores, with usage statistics
	defer svc.Close()
	defer rec.Close(ctx)
	defer mgr.Close()
	for account, dates := range map[string][]string{
		"acme":   {"2024-02-29", "2024-03-01", "2024-02-30"}, // the last is rejected, and charged
		"globex": {"2024-02-29"},
	} {
		_, _, key, _ := mgr.CreateAccount(ctx, accounts.Spec{ID: account, Plan: "pro"})
		caller := tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: key}, Channel: auth.ChannelREST}
		for _, date := range dates {
			svc.Call(ctx, caller, "date-info", func(*catalog.API) (tollgate.Input, error) {
				return tollgate.Input{JSON: map[string]any{"date": date}}, nil
			})
		}
	}
	_ = rec.Flush(ctx)
	today := usage.Day.Start(now)
	page, err := mgr.UsageTotals(ctx, usage.TotalsQuery{From: today, To: today.Add(24 * time.Hour), Order: usage.ByCredits})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range page.Rows {
		fmt.Println(g.Group, g.Calls, "calls,", g.Credits, "credits,", g.Errors, "errors")
	}
	fmt.Println("all:", page.Sum.Calls, "calls from the", page.Resolution, "buckets")
	page, _ = mgr.UsageTotals(ctx, usage.TotalsQuery{From: today, To: today.Add(24 * time.Hour), GroupBy: usage.ByOutcome})
	for _, g := range page.Rows {
		fmt.Println(g.Group, g.Calls)
	}
	// Output:
	// acme 3 calls, 3 credits, 1 errors
	// globex 1 calls, 1 credits, 0 errors
	// all: 4 calls from the day buckets
	// ok 3
	// rejected 1
}

// totalsDown is a memory usage store whose Totals fails as a database that cannot be
// reached does.
type totalsDown struct{ *memory.UsageStore }

func (totalsDown) Totals(context.Context, usage.TotalsQuery) (usage.TotalsPage, error) {
	return usage.TotalsPage{}, fmt.Errorf("postgres: usage: totals by account: %w: dial tcp 10.0.0.7:5432: connection refused", store.ErrUnavailable)
}

// UsageTotals refuses a query to fix with CodeInvalidInput naming the field, an
// account id, channel or outcome that no record can hold included; it is CodeNotFound
// without usage statistics and CodeUnavailable when the store cannot answer, in words
// that name no implementation.
func TestUsageTotalsErrors(t *testing.T) {
	day := time.Date(2030, time.January, 15, 0, 0, 0, 0, time.UTC)
	ok := usage.TotalsQuery{From: day, To: day.Add(24 * time.Hour)}
	h := newHarness(t, harnessOptions{usage: memory.NewUsageStore()})
	for _, tc := range []struct {
		name, param string
		edit        func(*usage.TotalsQuery)
	}{
		{"no range", "from", func(q *usage.TotalsQuery) { q.From = time.Time{} }},
		{"a long range to a minute", "to", func(q *usage.TotalsQuery) { q.To = q.To.Add(time.Minute) }},
		{"grouped by key", "group_by", func(q *usage.TotalsQuery) { q.GroupBy = usage.ByKey }},
		{"a bad cursor", "cursor", func(q *usage.TotalsQuery) { q.Cursor = "account.calls.x" }},
		{"a long account id", "account", func(q *usage.TotalsQuery) { q.Account = strings.Repeat("a", 65) }},
		{"a line break in the account id", "account", func(q *usage.TotalsQuery) { q.Account = "a\nb" }},
		{"an unknown channel", "channel", func(q *usage.TotalsQuery) { q.Channel = "fax" }},
		{"an unknown outcome", "outcome", func(q *usage.TotalsQuery) { q.Outcome = "error" }},
	} {
		q := ok
		tc.edit(&q)
		_, err := h.mgr.UsageTotals(t.Context(), q)
		if e, isErr := err.(*tollgate.Error); !isErr || e.Code != tollgate.CodeInvalidInput || !strings.HasPrefix(e.Message, tc.param+": ") {
			t.Errorf("UsageTotals with %s: %v, want invalid_input beginning with %q", tc.name, err, tc.param+": ")
		}
	}
	for _, q := range []usage.TotalsQuery{
		{From: day, To: day.Add(time.Hour), Channel: "other", Outcome: "idempotency_key_reused", Account: "acct"},
		{From: day, To: day.Add(time.Hour), Channel: "batch", Outcome: usage.OK},
	} {
		if _, err := h.mgr.UsageTotals(t.Context(), q); err != nil {
			t.Errorf("UsageTotals(%+v): %v", q, err)
		}
	}

	none := newHarness(t, harnessOptions{})
	if _, err := none.mgr.UsageTotals(t.Context(), ok); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Errorf("UsageTotals without usage statistics: %v, want not_found", err)
	}

	logs := &testenv.Logs{}
	down := newHarness(t, harnessOptions{usage: totalsDown{memory.NewUsageStore()}, opts: tollgate.Options{Logger: logs.Logger()}})
	_, err := down.mgr.UsageTotals(t.Context(), ok)
	if tollgate.CodeOf(err) != tollgate.CodeUnavailable || strings.Contains(err.Error(), "postgres") || strings.Contains(err.Error(), "10.0.0.7") {
		t.Errorf("UsageTotals with the store down: %v, want unavailable in words that name no implementation", err)
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the store's failure is not logged: %s", logs.String())
	}
}
