package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/event"
)

// The labels of the metrics.
const (
	// LabelAPI is the id of a catalog API.
	LabelAPI = "api"
	// LabelChannel is the door a call came through: "rest", "graphql", "mcp",
	// "batch" (each item of a batch) or "other" (a call made without a door).
	LabelChannel = "channel"
	// LabelOutcome is "ok" for a call of an API that succeeded, else the code of its
	// failure ("rejected", "timeout", "api_failed", ...).
	LabelOutcome = "outcome"
	// LabelCode is the code of a refusal ("rate_limited", "credits_exhausted", ...).
	LabelCode = "code"
	// LabelPhase is a phase of a call: "admission", "handler" or "settlement".
	LabelPhase = "phase"
	// LabelSettlement is what became of a call's charge: "settled", "deferred",
	// "voided" or "unsettled" (see event.Settlement).
	LabelSettlement = "settlement"
	// LabelStore names a store by the package of its type ("memory", "postgres",
	// "redis", or the host's own).
	LabelStore = "store"
	// LabelOperation is a store's operation, its method in snake case ("admit",
	// "settle", "resolve", ...).
	LabelOperation = "operation"
	// LabelError is the kind of a store's failure: "unavailable", "timeout",
	// "canceled" or "invalid".
	LabelError = "error"
	// LabelAccount is the account of a call, only with [Options.AccountLabel].
	LabelAccount = "account"
)

// OK is the outcome of a call of an API that succeeded.
const OK = "ok"

// The phases of a call.
const (
	PhaseAdmission  = "admission"
	PhaseHandler    = "handler"
	PhaseSettlement = "settlement"
)

// DefaultCallBuckets returns the default [Options.CallBuckets]: upper bounds in seconds
// from a millisecond to a minute, past the default call timeout (30s).
func DefaultCallBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
}

// DefaultStoreBuckets returns the default [Options.StoreBuckets]: upper bounds in
// seconds from 100µs (a local Redis) to 5s (a store that is failing).
func DefaultStoreBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
}

// DefaultOutboxTimeout is the default [Options.OutboxTimeout].
const DefaultOutboxTimeout = 2 * time.Second

// Options configures [New]. The zero value is the default.
type Options struct {
	// CallBuckets are the upper bounds, in seconds, of the buckets of
	// tollgate_call_duration_seconds and tollgate_call_phase_duration_seconds. The
	// default is [DefaultCallBuckets].
	CallBuckets []float64
	// StoreBuckets are those of tollgate_store_operation_duration_seconds. The default
	// is [DefaultStoreBuckets].
	StoreBuckets []float64
	// AccountLabel, when set, adds the label "account" to tollgate_calls_total,
	// tollgate_credits_charged_total and tollgate_refusals_total, valued by what it
	// returns for the call's account id ("" is "other"). Each value it returns is more
	// series of each counter, which Prometheus keeps for as long as it retains them:
	// return the id itself only for a number of accounts you know Prometheus can hold,
	// or a bucket of your own (a tier, a few large customers by name and "other" for
	// the rest). It is called on the goroutine of every call, so it returns promptly.
	// Nil (the default) puts no account in any label.
	AccountLabel func(account string) string
	// Now returns the current time, for the latency of the stores' operations (see
	// [Metrics.Stores]). The default is the monotonic clock, as time.Since reads it. The
	// latency of calls is the service's own, told by its events.
	Now func() time.Time
	// OutboxTimeout bounds the read of the webhook outbox's pending deliveries at each
	// scrape ([Sources].WebhookOutbox). The default is [DefaultOutboxTimeout].
	OutboxTimeout time.Duration
}

// Metrics is the Prometheus metrics of a Tollgate service: an [event.Observer] of its
// calls, refusals and sweeps, a decorator of its stores ([Metrics.Stores]) and a reader
// of the figures its parts keep ([Metrics.Watch]). Subscribe it to the service with
// [Metrics.Attach], or as any observer:
//
//	svc.Events().Subscribe(m, m.Kinds()...)
//
// Observe costs a few atomic additions per API of a call, and allocates nothing once
// a label set has been seen. A Metrics is safe for concurrent use.
type Metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
	account    func(string) string
	now        func() time.Time // Options.Now; nil: the monotonic clock
	epoch      time.Time        // when the metrics were made: the origin of elapsed

	calls       *prometheus.CounterVec // api, channel, outcome [, account]
	callSeconds *durationVec           // api, channel
	phases      *durationVec           // channel, phase
	credits     *prometheus.CounterVec // api [, account]
	refusals    *prometheus.CounterVec // api, channel, code [, account]
	settlements *prometheus.CounterVec // settlement
	voided      prometheus.Counter
	storeOps    *durationVec           // store, operation
	storeErrors *prometheus.CounterVec // store, operation, error

	settled  [4]prometheus.Counter // by event.Settlement
	doors    [len(doorNames)]atomic.Pointer[channelSeries]
	channels cache[string, *channelSeries]
	refused  cache[refusalKey, prometheus.Counter]

	sources *sourceCollector

	wholesMu sync.Mutex
	wholes   []wholeStore // the whole stores decorated, and their decorators
}

// doorNames are the channels of the doors, whose series are found without a map.
var doorNames = [...]string{"rest", "graphql", "mcp", "batch", "other"}

// channelSeries are the series of the calls through one door: the phases, and the
// series of each API (and account label).
type channelSeries struct {
	admission, handler, settlement *durations
	apis                           cache[apiAccount, *apiSeries]
}

type apiAccount struct{ api, account string }

// apiSeries are the series a call of one API through one door updates: its latency,
// its credits, and its count by outcome.
type apiSeries struct {
	seconds *durations
	credits prometheus.Counter
	ok      prometheus.Counter
	failed  cache[string, prometheus.Counter] // by outcome
}

// refusalKey is the label set of the series of one API's refusals.
type refusalKey struct{ api, channel, code, account string }

// New returns the metrics of a service, registered on reg. opts may be nil. It fails
// if reg already holds metrics of the same names (a second Metrics on one registry:
// give each its own, or wrap reg with prometheus.WrapRegistererWith and a label that
// tells them apart).
func New(reg prometheus.Registerer, opts *Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: New needs a prometheus.Registerer (prometheus.NewRegistry(), or prometheus.DefaultRegisterer)")
	}
	if opts == nil {
		opts = &Options{}
	}
	callBuckets, storeBuckets := opts.CallBuckets, opts.StoreBuckets
	if len(callBuckets) == 0 {
		callBuckets = DefaultCallBuckets()
	}
	if len(storeBuckets) == 0 {
		storeBuckets = DefaultStoreBuckets()
	}
	for _, b := range [][]float64{callBuckets, storeBuckets} {
		for i := 1; i < len(b); i++ {
			if b[i] <= b[i-1] {
				return nil, fmt.Errorf("metrics: the buckets %v do not increase: give their upper bounds in increasing order", b)
			}
		}
	}
	m := &Metrics{reg: reg, account: opts.AccountLabel, now: opts.Now, epoch: time.Now()}
	if m.now != nil {
		m.epoch = m.now()
	}
	withAccount := func(labels ...string) []string {
		if m.account != nil {
			return append(labels, LabelAccount)
		}
		return labels
	}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_calls_total",
		Help: "Calls of an API that ran, by API, door and outcome (ok, or the code of the failure); each API of a GraphQL query and each item of a batch is one.",
	}, withAccount(LabelAPI, LabelChannel, LabelOutcome))
	m.callSeconds = newDurationVec("tollgate_call_duration_seconds",
		"Time a call of an API took in the service: its admission, the API's own run and its settlement.",
		callBuckets, LabelAPI, LabelChannel)
	m.phases = newDurationVec("tollgate_call_phase_duration_seconds",
		"Time each phase of a call took (admission: limits, credits, key check; handler: the APIs' run, the longest of several; settlement), one observation per call.",
		callBuckets, LabelChannel, LabelPhase)
	m.credits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_credits_charged_total",
		Help: "Credits charged for calls of an API, after refunds; a deferred settlement is counted when the call ends.",
	}, withAccount(LabelAPI))
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_refusals_total",
		Help: "Calls of an API by an authenticated caller refused before they ran, by API, door and code; each API of a GraphQL query and each item of a batch is one.",
	}, withAccount(LabelAPI, LabelChannel, LabelCode))
	m.settlements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_settlements_total",
		Help: "Calls that ran, by what became of their charge: settled, deferred (retried in the background), voided (not charged) or unsettled (not charged).",
	}, []string{LabelSettlement})
	m.voided = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_reservations_voided_total",
		Help: "Expired reservations voided by this instance's sweeps, their credits given back.",
	})
	m.storeOps = newDurationVec("tollgate_store_operation_duration_seconds",
		"Time an operation of a store took, failed or not, by store and operation.",
		storeBuckets, LabelStore, LabelOperation)
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_store_errors_total",
		Help: "Operations of a store that failed, by store, operation and kind (unavailable, timeout, canceled, invalid); the answers a store gives (not found, conflict, credits short) are not failures.",
	}, []string{LabelStore, LabelOperation, LabelError})
	timeout := opts.OutboxTimeout
	if timeout <= 0 {
		timeout = DefaultOutboxTimeout
	}
	m.sources = newSourceCollector(timeout)

	for i := range m.settled {
		m.settled[i] = m.settlements.WithLabelValues(event.Settlement(i).String())
	}
	m.channels.create = m.newChannelSeries
	m.refused.create = m.newRefusal

	for _, c := range []prometheus.Collector{m.calls, m.callSeconds, m.phases, m.credits, m.refusals,
		m.settlements, m.voided, m.storeOps, m.storeErrors, m.sources} {
		if err := reg.Register(c); err != nil {
			m.Unregister()
			return nil, fmt.Errorf("metrics: cannot register Tollgate's metrics (a registry holds them once: give each Metrics a registry of its own): %w", err)
		}
		m.collectors = append(m.collectors, c)
	}
	return m, nil
}

// Unregister removes the metrics from the registry New registered them on. The Metrics
// still counts, but nothing exposes it any more.
func (m *Metrics) Unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
	m.collectors = nil
}

// Kinds returns the kinds of events the metrics count: calls that ran, calls refused,
// and the sweeps that voided reservations.
func (m *Metrics) Kinds() []event.Kind {
	return []event.Kind{event.CallFinished, event.CallRefused, event.ReservationsVoided}
}

// Attach subscribes m to the events of svc and reads its pending settlements at each
// scrape, until detach is called. A host that attaches the same Metrics to several
// services (one process serving several catalogs) gets their sum, but for the pending
// settlements, which are the last service's.
func (m *Metrics) Attach(svc *tollgate.Service) (detach func()) {
	cancel := svc.Events().Subscribe(m, m.Kinds()...)
	m.Watch(Sources{Settlements: svc})
	return func() {
		cancel()
		m.sources.forget(svc)
	}
}

// Observe counts e. It is an [event.Observer]: for a call that ran, one call per API
// with its outcome, latency and credits, one observation of each phase and its
// settlement; for a refusal, one per API it names; for a sweep, the reservations it
// voided.
func (m *Metrics) Observe(_ context.Context, e event.Event) {
	switch e := e.(type) {
	case *event.Call:
		m.observeCall(e)
	case *event.Refusal:
		account := m.accountLabel(e.Account)
		for _, api := range e.APIs {
			m.refused.get(refusalKey{api, e.Channel, e.Code, account}).Inc()
		}
	case *event.Sweep:
		if e.Voided > 0 {
			m.voided.Add(float64(e.Voided))
		}
	}
}

func (m *Metrics) observeCall(e *event.Call) {
	ch := m.channel(e.Channel)
	ch.admission.observe(e.Admission)
	ch.handler.observe(e.Run)
	ch.settlement.observe(e.Settle)
	if int(e.Settlement) < len(m.settled) {
		m.settled[e.Settlement].Inc()
	}
	account := m.accountLabel(e.Account)
	around := e.Admission + e.Settle
	for i := range e.APIs {
		a := &e.APIs[i]
		s := ch.apis.get(apiAccount{a.API, account})
		if a.Code == "" {
			s.ok.Inc()
		} else {
			s.failed.get(a.Code).Inc()
		}
		s.seconds.observe(around + a.Duration)
		if a.Credits > 0 {
			s.credits.Add(float64(a.Credits))
		}
	}
}

// accountLabel returns the value of the account label for account, "" without one.
func (m *Metrics) accountLabel(account string) string {
	if m.account == nil {
		return ""
	}
	if v := m.account(account); v != "" {
		return v
	}
	return "other"
}

// labels returns the label values, with the account's when the metrics have the label.
func (m *Metrics) labels(account string, values ...string) []string {
	if m.account != nil {
		return append(values, account)
	}
	return values
}

// channel returns the series of the calls through a door.
func (m *Metrics) channel(name string) *channelSeries {
	for i := range doorNames {
		if doorNames[i] == name {
			if cs := m.doors[i].Load(); cs != nil {
				return cs
			}
			cs := m.channels.get(name)
			m.doors[i].Store(cs)
			return cs
		}
	}
	return m.channels.get(name)
}

func (m *Metrics) newChannelSeries(channel string) *channelSeries {
	cs := &channelSeries{
		admission:  m.phases.with(channel, PhaseAdmission),
		handler:    m.phases.with(channel, PhaseHandler),
		settlement: m.phases.with(channel, PhaseSettlement),
	}
	cs.apis.create = func(k apiAccount) *apiSeries {
		s := &apiSeries{
			seconds: m.callSeconds.with(k.api, channel),
			credits: m.credits.WithLabelValues(m.labels(k.account, k.api)...),
			ok:      m.calls.WithLabelValues(m.labels(k.account, k.api, channel, OK)...),
		}
		s.failed.create = func(outcome string) prometheus.Counter {
			return m.calls.WithLabelValues(m.labels(k.account, k.api, channel, outcome)...)
		}
		return s
	}
	return cs
}

func (m *Metrics) newRefusal(k refusalKey) prometheus.Counter {
	return m.refusals.WithLabelValues(m.labels(k.account, k.api, k.channel, k.code)...)
}

// A cache maps label sets to the series they name, so that the hot path finds them
// without hashing the label values as the vectors do (and without the allocation of
// their variadic arguments). Reads load a map that is never changed once published;
// a label set seen for the first time publishes a copy with it. The label sets are
// bounded (see the package documentation), and so is the map.
type cache[K comparable, V any] struct {
	create func(K) V
	m      atomic.Pointer[map[K]V]
	mu     sync.Mutex // serializes the copies
}

func (c *cache[K, V]) get(k K) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	var n map[K]V
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		n = make(map[K]V, len(*old)+1)
		for k, v := range *old {
			n[k] = v
		}
	} else {
		n = make(map[K]V, 1)
	}
	v := c.create(k)
	n[k] = v
	c.m.Store(&n)
	return v
}

// Handler returns the handler of GET /metrics for the metrics gathered by g (the
// registry given to [New]): the Prometheus text format, or OpenMetrics to a scraper
// that asks for it. A metric whose source fails (the webhook outbox's store, say) is
// left out of the answer, which is served with the others.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		EnableOpenMetrics:   true,
	})
}
