package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// buckets are small buckets, so that the expected histograms stay short. The
// durations of the tests are sums of powers of two, which floats hold exactly.
var buckets = []float64{0.01, 0.1, 1}

const (
	ms8   = time.Second / 128 // 7.8125ms
	ms62  = time.Second / 16  // 62.5ms
	ms250 = time.Second / 4
)

// newMetrics returns metrics on a registry of their own.
func newMetrics(t testing.TB, opts *metrics.Options) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if opts == nil {
		opts = &metrics.Options{}
	}
	if opts.CallBuckets == nil {
		opts.CallBuckets = buckets
	}
	if opts.StoreBuckets == nil {
		opts.StoreBuckets = buckets
	}
	m, err := metrics.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// compare checks that the family name holds exactly the samples given (lines of the
// text format without HELP and TYPE, which are the registry's own).
func compare(t *testing.T, reg *prometheus.Registry, name string, samples ...string) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var head string
	for _, f := range families {
		if f.GetName() == name {
			head = fmt.Sprintf("# HELP %s %s\n# TYPE %s %s\n", name, f.GetHelp(), name, strings.ToLower(f.GetType().String()))
		}
	}
	if head == "" {
		if len(samples) > 0 {
			t.Errorf("%s: not exposed, want %d samples", name, len(samples))
		}
		return
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(head+strings.Join(samples, "\n")+"\n"), name); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// histogram returns the samples of one series of a histogram with the test's buckets
// after the observations given.
func histogram(name, labels string, obs ...time.Duration) []string {
	var out []string
	sep := ""
	if labels != "" {
		sep = ","
	}
	var sum float64
	for _, o := range obs {
		sum += o.Seconds()
	}
	for _, le := range append(slices.Clone(buckets), -1) {
		n, bound := 0, "+Inf"
		for _, o := range obs {
			if le < 0 || o.Seconds() <= le {
				n++
			}
		}
		if le >= 0 {
			bound = strconv.FormatFloat(le, 'g', -1, 64)
		}
		out = append(out, fmt.Sprintf(`%s_bucket{%s%sle="%s"} %d`, name, labels, sep, bound, n))
	}
	braces := ""
	if labels != "" {
		braces = "{" + labels + "}"
	}
	return append(out,
		fmt.Sprintf("%s_sum%s %s", name, braces, strconv.FormatFloat(sum, 'g', -1, 64)),
		fmt.Sprintf("%s_count%s %d", name, braces, len(obs)))
}

func join(parts ...[]string) []string { return slices.Concat(parts...) }

// callEvents are calls through every door, with every settlement, refusals for three
// causes and two sweeps.
func callEvents() []event.Event {
	rest := &event.Call{Account: "acme", Key: "key_1", Channel: "rest",
		APIs:       []event.APIResult{{API: "hash", Credits: 1, Duration: ms62}},
		Charged:    1,
		Settlement: event.Settled, Admission: ms8, Run: ms62, Settle: ms8}
	return []event.Event{
		rest,
		rest,
		&event.Call{Account: "acme", Key: "key_1", Channel: "graphql",
			APIs:       []event.APIResult{{API: "hash", Credits: 1, Duration: ms62}, {API: "echo", Code: "api_failed", Duration: ms250}},
			Charged:    1,
			Settlement: event.Settled, Admission: ms8, Run: ms250, Settle: ms8},
		&event.Call{Account: "bulk", Key: "key_2", Channel: "batch",
			APIs: []event.APIResult{{API: "hash", Credits: 1, Duration: ms8}, {API: "hash", Credits: 1, Duration: ms8},
				{API: "hash", Code: "rejected", Duration: ms8}},
			Charged:    2,
			Settlement: event.Deferred, Admission: ms8, Run: ms8, Settle: ms250},
		&event.Call{Account: "acme", Key: "key_1", Channel: "mcp",
			APIs:       []event.APIResult{{API: "hash", Duration: time.Second / 2}},
			Settlement: event.Voided, Admission: ms8, Run: time.Second / 2, Settle: ms8},
		&event.Refusal{Account: "trickle", Key: "key_3", Channel: "rest", APIs: []string{"hash"}, Code: "rate_limited"},
		&event.Refusal{Account: "broke", Key: "key_4", Channel: "batch", APIs: []string{"hash", "hash"}, Code: "credits_exhausted"},
		&event.Refusal{Account: "acme", Key: "key_5", Channel: "graphql", APIs: []string{"hash", "echo"}, Code: "forbidden"},
		&event.Sweep{Voided: 3},
		&event.Sweep{Voided: 0},
	}
}

// TestObserve checks every counter and histogram of the events against the events
// given, exactly.
func TestObserve(t *testing.T) {
	m, reg := newMetrics(t, nil)
	for _, e := range callEvents() {
		m.Observe(context.Background(), e)
	}

	compare(t, reg, "tollgate_calls_total",
		`tollgate_calls_total{api="echo",channel="graphql",outcome="api_failed"} 1`,
		`tollgate_calls_total{api="echo",channel="graphql",outcome="ok"} 0`,
		`tollgate_calls_total{api="hash",channel="batch",outcome="ok"} 2`,
		`tollgate_calls_total{api="hash",channel="batch",outcome="rejected"} 1`,
		`tollgate_calls_total{api="hash",channel="graphql",outcome="ok"} 1`,
		`tollgate_calls_total{api="hash",channel="mcp",outcome="ok"} 1`,
		`tollgate_calls_total{api="hash",channel="rest",outcome="ok"} 2`,
	)
	compare(t, reg, "tollgate_credits_charged_total",
		`tollgate_credits_charged_total{api="echo"} 0`,
		`tollgate_credits_charged_total{api="hash"} 5`,
	)
	compare(t, reg, "tollgate_settlements_total",
		`tollgate_settlements_total{settlement="deferred"} 1`,
		`tollgate_settlements_total{settlement="settled"} 3`,
		`tollgate_settlements_total{settlement="unsettled"} 0`,
		`tollgate_settlements_total{settlement="voided"} 1`,
	)
	compare(t, reg, "tollgate_refusals_total",
		`tollgate_refusals_total{api="echo",channel="graphql",code="forbidden"} 1`,
		`tollgate_refusals_total{api="hash",channel="batch",code="credits_exhausted"} 2`,
		`tollgate_refusals_total{api="hash",channel="graphql",code="forbidden"} 1`,
		`tollgate_refusals_total{api="hash",channel="rest",code="rate_limited"} 1`,
	)
	compare(t, reg, "tollgate_reservations_voided_total", `tollgate_reservations_voided_total 3`)

	const d = "tollgate_call_duration_seconds"
	compare(t, reg, d, join(
		histogram(d, `api="echo",channel="graphql"`, ms8+ms250+ms8),
		histogram(d, `api="hash",channel="batch"`, ms8+ms8+ms250, ms8+ms8+ms250, ms8+ms8+ms250),
		histogram(d, `api="hash",channel="graphql"`, ms8+ms62+ms8),
		histogram(d, `api="hash",channel="mcp"`, ms8+time.Second/2+ms8),
		histogram(d, `api="hash",channel="rest"`, ms8+ms62+ms8, ms8+ms62+ms8),
	)...)
	const p = "tollgate_call_phase_duration_seconds"
	compare(t, reg, p, join(
		histogram(p, `channel="batch",phase="admission"`, ms8),
		histogram(p, `channel="batch",phase="handler"`, ms8),
		histogram(p, `channel="batch",phase="settlement"`, ms250),
		histogram(p, `channel="graphql",phase="admission"`, ms8),
		histogram(p, `channel="graphql",phase="handler"`, ms250),
		histogram(p, `channel="graphql",phase="settlement"`, ms8),
		histogram(p, `channel="mcp",phase="admission"`, ms8),
		histogram(p, `channel="mcp",phase="handler"`, time.Second/2),
		histogram(p, `channel="mcp",phase="settlement"`, ms8),
		histogram(p, `channel="rest",phase="admission"`, ms8, ms8),
		histogram(p, `channel="rest",phase="handler"`, ms62, ms62),
		histogram(p, `channel="rest",phase="settlement"`, ms8, ms8),
	)...)
}

// TestNoAccountByDefault checks that no metric has a label that could hold a key or an
// account unless the host asks for one, and that AccountLabel adds the account label
// to the counters it names, with its own values.
func TestNoAccountByDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    *metrics.Options
		account bool
	}{
		{"default", nil, false},
		{"AccountLabel", &metrics.Options{AccountLabel: func(a string) string {
			if a == "acme" {
				return "acme"
			}
			return ""
		}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newMetrics(t, tc.opts)
			for _, e := range callEvents() {
				m.Observe(context.Background(), e)
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				for _, s := range f.GetMetric() {
					for _, l := range s.GetLabel() {
						switch l.GetName() {
						case "key", "key_id":
							t.Errorf("%s has a label %s", f.GetName(), l.GetName())
						case "account":
							if !tc.account {
								t.Errorf("%s has an account label by default", f.GetName())
							}
						}
						if strings.HasPrefix(l.GetValue(), "key_") || l.GetValue() == "trickle" || l.GetValue() == "broke" || l.GetValue() == "bulk" {
							t.Errorf("%s{%s=%q}: a key or an account the host did not name", f.GetName(), l.GetName(), l.GetValue())
						}
					}
				}
			}
			if !tc.account {
				return
			}
			compare(t, reg, "tollgate_credits_charged_total",
				`tollgate_credits_charged_total{account="acme",api="echo"} 0`,
				`tollgate_credits_charged_total{account="acme",api="hash"} 3`,
				`tollgate_credits_charged_total{account="other",api="hash"} 2`,
			)
			compare(t, reg, "tollgate_refusals_total",
				`tollgate_refusals_total{account="acme",api="echo",channel="graphql",code="forbidden"} 1`,
				`tollgate_refusals_total{account="acme",api="hash",channel="graphql",code="forbidden"} 1`,
				`tollgate_refusals_total{account="other",api="hash",channel="batch",code="credits_exhausted"} 2`,
				`tollgate_refusals_total{account="other",api="hash",channel="rest",code="rate_limited"} 1`,
			)
			compare(t, reg, "tollgate_calls_total",
				`tollgate_calls_total{account="acme",api="echo",channel="graphql",outcome="api_failed"} 1`,
				`tollgate_calls_total{account="acme",api="echo",channel="graphql",outcome="ok"} 0`,
				`tollgate_calls_total{account="acme",api="hash",channel="graphql",outcome="ok"} 1`,
				`tollgate_calls_total{account="acme",api="hash",channel="mcp",outcome="ok"} 1`,
				`tollgate_calls_total{account="acme",api="hash",channel="rest",outcome="ok"} 2`,
				`tollgate_calls_total{account="other",api="hash",channel="batch",outcome="ok"} 2`,
				`tollgate_calls_total{account="other",api="hash",channel="batch",outcome="rejected"} 1`,
			)
		})
	}
}

// TestRegisterTwice checks that a second Metrics on the same registry is refused, with
// a message that says what to do, and that Unregister frees the names.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg, nil); err == nil || !strings.Contains(err.Error(), "registry of its own") {
		t.Errorf("a second Metrics on one registry: %v", err)
	}
	m.Unregister()
	if _, err := metrics.New(reg, nil); err != nil {
		t.Errorf("after Unregister: %v", err)
	}
	if _, err := metrics.New(nil, nil); err == nil {
		t.Error("New(nil) made metrics")
	}
	if _, err := metrics.New(prometheus.NewRegistry(), &metrics.Options{CallBuckets: []float64{1, 0.5}}); err == nil || !strings.Contains(err.Error(), "increasing order") {
		t.Errorf("buckets that decrease: %v", err)
	}
}

// fakeSources implement every source with fixed figures.
type fakeSources struct {
	pending, queued int
	dropped         int64
}

func (f *fakeSources) Stats() tollgate.Stats { return tollgate.Stats{PendingSettlements: f.pending} }
func (f *fakeSources) Pending() int          { return f.queued }
func (f *fakeSources) Dropped() int64        { return f.dropped }
func (f *fakeSources) LiveSessions() int     { return 4 }

type dispatchFake struct{}

func (dispatchFake) Stats() webhook.DispatchStats {
	return webhook.DispatchStats{Enqueued: 10, Duplicates: 2, Dropped: 1, EndpointsFull: 3, Queued: 5}
}

type deliveryFake struct{}

func (deliveryFake) Stats() webhook.DelivererStats {
	return webhook.DelivererStats{Attempted: 12, Delivered: 8, Retried: 3, Failed: 1, Skipped: 1, Postponed: 2,
		ClaimLost: 1, Disabled: 1, StoreErrors: 6}
}

type outboxFake struct{ err error }

func (o outboxFake) Pending(ctx context.Context) (int64, error) {
	if _, ok := ctx.Deadline(); !ok {
		return 0, errors.New("no deadline")
	}
	return 42, o.err
}

// TestSources checks the figures read at a scrape: none before a source is given, then
// each source's.
func TestSources(t *testing.T) {
	m, reg := newMetrics(t, nil)
	if n, err := testutil.GatherAndCount(reg, "tollgate_pending_settlements", "tollgate_mcp_sessions", "tollgate_webhook_outbox_pending"); err != nil || n != 0 {
		t.Errorf("without sources: %d series, %v", n, err)
	}
	f := &fakeSources{pending: 7, queued: 9, dropped: 11}
	m.Watch(metrics.Sources{Settlements: f, Usage: f, MCP: f})
	m.Watch(metrics.Sources{Audit: &fakeSources{queued: 1, dropped: 2}, WebhookDispatch: dispatchFake{},
		WebhookDelivery: deliveryFake{}, WebhookOutbox: outboxFake{}})
	for name, want := range map[string]string{
		"tollgate_pending_settlements":                 "tollgate_pending_settlements 7",
		"tollgate_usage_pending_rows":                  "tollgate_usage_pending_rows 9",
		"tollgate_usage_dropped_total":                 "tollgate_usage_dropped_total 11",
		"tollgate_audit_pending_entries":               "tollgate_audit_pending_entries 1",
		"tollgate_audit_dropped_total":                 "tollgate_audit_dropped_total 2",
		"tollgate_mcp_sessions":                        "tollgate_mcp_sessions 4",
		"tollgate_webhook_queued_messages":             "tollgate_webhook_queued_messages 5",
		"tollgate_webhook_messages_enqueued_total":     "tollgate_webhook_messages_enqueued_total 10",
		"tollgate_webhook_messages_dropped_total":      "tollgate_webhook_messages_dropped_total 1",
		"tollgate_webhook_deliveries_dropped_total":    "tollgate_webhook_deliveries_dropped_total 3",
		"tollgate_webhook_delivery_attempts_total":     "tollgate_webhook_delivery_attempts_total 12",
		"tollgate_webhook_endpoints_disabled_total":    "tollgate_webhook_endpoints_disabled_total 1",
		"tollgate_webhook_delivery_store_errors_total": "tollgate_webhook_delivery_store_errors_total 6",
		"tollgate_webhook_outbox_pending":              "tollgate_webhook_outbox_pending 42",
	} {
		compare(t, reg, name, want)
	}
	compare(t, reg, "tollgate_webhook_deliveries_total",
		`tollgate_webhook_deliveries_total{outcome="claim_lost"} 1`,
		`tollgate_webhook_deliveries_total{outcome="delivered"} 8`,
		`tollgate_webhook_deliveries_total{outcome="failed"} 1`,
		`tollgate_webhook_deliveries_total{outcome="postponed"} 2`,
		`tollgate_webhook_deliveries_total{outcome="retried"} 3`,
	)

	// An outbox that cannot be read fails its own metric only.
	m.Watch(metrics.Sources{WebhookOutbox: outboxFake{err: errors.New("the store is down")}})
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "the store is down") {
		t.Errorf("an outbox that fails: %v", err)
	}
	rec := httptestGet(t, metrics.Handler(reg))
	if !strings.Contains(rec, "tollgate_pending_settlements 7") || strings.Contains(rec, "tollgate_webhook_outbox_pending") {
		t.Errorf("the scrape while the outbox fails:\n%s", rec)
	}
}

// httptestGet returns the body of a GET of h.
func httptestGet(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestAttach checks that Attach subscribes the metrics to the service's events and
// reads its pending settlements, and that detaching undoes both.
func TestAttach(t *testing.T) {
	m, reg := newMetrics(t, nil)
	plans, err := billing.NewPlans(billing.Plan{Name: "pro", Credits: 10})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	detach := m.Attach(svc)
	for _, k := range m.Kinds() {
		if !svc.Events().Wants(k) {
			t.Errorf("attached, the service tells no one of %s", k)
		}
	}
	compare(t, reg, "tollgate_pending_settlements", "tollgate_pending_settlements 0")
	detach()
	for _, k := range m.Kinds() {
		if svc.Events().Wants(k) {
			t.Errorf("detached, the service still tells of %s", k)
		}
	}
	compare(t, reg, "tollgate_pending_settlements")
}
