package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/webhook"
)

// Sources are the parts of a service whose figures the metrics read at each scrape:
// the depths of the queues kept in the background and what they dropped. Each is
// optional; the metrics of a source that is not given are not exposed. The comment of
// each field names the type that implements it.
type Sources struct {
	// Settlements is the service (*tollgate.Service): tollgate_pending_settlements.
	// [Metrics.Attach] sets it.
	Settlements SettlementSource
	// Usage is the usage statistics' recorder (*usage.Recorder):
	// tollgate_usage_pending_rows and tollgate_usage_dropped_total.
	Usage Queue
	// Audit is the audit log (*audit.Log): tollgate_audit_pending_entries and
	// tollgate_audit_dropped_total.
	Audit Queue
	// WebhookDispatch is the webhooks' dispatcher (*webhook.Dispatcher):
	// tollgate_webhook_queued_messages and the counters of the messages enqueued and
	// dropped. [WebhookSources] sets it.
	WebhookDispatch DispatchSource
	// WebhookDelivery is the webhooks' deliverer (*webhook.Deliverer): the counters of
	// the attempts and their outcomes. [WebhookSources] sets it.
	WebhookDelivery DeliverySource
	// WebhookOutbox is the webhooks' store (webhook.Store):
	// tollgate_webhook_outbox_pending, read at each scrape within
	// [Options.OutboxTimeout]. The store is shared: every instance reports the same
	// figure. [WebhookSources] sets it.
	WebhookOutbox OutboxSource
	// MCP is the MCP door (*mcp.Handler): tollgate_mcp_sessions.
	MCP SessionSource
}

// A SettlementSource tells the settlements a service is retrying:
// *tollgate.Service is one.
type SettlementSource interface {
	Stats() tollgate.Stats
}

// A Queue is a queue kept in memory while a store does not take what it is given:
// *usage.Recorder and *audit.Log are queues.
type Queue interface {
	// Pending is the number of items waiting for the store now.
	Pending() int
	// Dropped is the number of items lost since the queue started.
	Dropped() int64
}

// A DispatchSource tells what a webhook dispatcher did: *webhook.Dispatcher is one.
type DispatchSource interface {
	Stats() webhook.DispatchStats
}

// A DeliverySource tells what a webhook deliverer did: *webhook.Deliverer is one.
type DeliverySource interface {
	Stats() webhook.DelivererStats
}

// An OutboxSource counts the webhook deliveries pending in the outbox: webhook.Store
// does.
type OutboxSource interface {
	Pending(ctx context.Context) (int64, error)
}

// A SessionSource counts the sessions a door holds open: *mcp.Handler is one.
type SessionSource interface {
	LiveSessions() int
}

// WebhookSources returns the sources of w, assembled on store s (the store given to
// webhook.New).
func WebhookSources(w *webhook.Webhooks, s webhook.Store) Sources {
	return Sources{WebhookDispatch: w.Dispatcher(), WebhookDelivery: w.Deliverer(), WebhookOutbox: s}
}

// Watch adds the sources of s that are set to those the metrics read at each scrape;
// one set before is replaced.
func (m *Metrics) Watch(s Sources) { m.sources.watch(s) }

// sourceCollector reads the sources at each scrape.
type sourceCollector struct {
	timeout time.Duration
	mu      sync.Mutex // serializes the changes of src
	src     atomic.Pointer[Sources]

	pendingSettlements, usagePending, usageDropped, auditPending, auditDropped *prometheus.Desc
	webhookQueued, webhookEnqueued, webhookDropped, webhookFull                *prometheus.Desc
	webhookAttempts, webhookDeliveries, webhookDisabled, webhookStoreErrors    *prometheus.Desc
	outboxPending, mcpSessions                                                 *prometheus.Desc
}

func newSourceCollector(timeout time.Duration) *sourceCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c := &sourceCollector{
		timeout:            timeout,
		pendingSettlements: d("tollgate_pending_settlements", "Settlements (charges kept or refunded, slots freed) a store could not take when they were due, retried in the background (at most 1024)."),
		usagePending:       d("tollgate_usage_pending_rows", "Usage rows kept in memory from flushes the usage store refused, retried with the next flush."),
		usageDropped:       d("tollgate_usage_dropped_total", "Calls whose usage statistics were dropped: kept past the recorder's bound while the store refused flushes, or that no store can hold."),
		auditPending:       d("tollgate_audit_pending_entries", "Audit entries the audit store could not take, retried in the background."),
		auditDropped:       d("tollgate_audit_dropped_total", "Audit entries the store will never hold (the queue was full, or the store refused them); each was logged."),
		webhookQueued:      d("tollgate_webhook_queued_messages", "Webhook messages waiting in memory to be enqueued in the outbox."),
		webhookEnqueued:    d("tollgate_webhook_messages_enqueued_total", "Webhook messages this instance stored in the outbox."),
		webhookDropped:     d("tollgate_webhook_messages_dropped_total", "Webhook messages lost before the outbox took them: the queue was full, the store failed them past their retries, or the flush at shutdown timed out."),
		webhookFull:        d("tollgate_webhook_deliveries_dropped_total", "Webhook deliveries not made because their endpoint had the most pending deliveries it may have."),
		webhookAttempts:    d("tollgate_webhook_delivery_attempts_total", "Webhook delivery attempts this instance made."),
		webhookDeliveries:  d("tollgate_webhook_deliveries_total", "Outcomes of webhook deliveries this instance recorded: delivered, retried (pending again), failed (given up), postponed (its host held back), claim_lost (another deliverer holds it).", LabelOutcome),
		webhookDisabled:    d("tollgate_webhook_endpoints_disabled_total", "Webhook endpoints this instance disabled after their deliveries failed."),
		webhookStoreErrors: d("tollgate_webhook_delivery_store_errors_total", "Failures of the webhook store seen by this instance's deliverer (claims, reads, outcomes)."),
		outboxPending:      d("tollgate_webhook_outbox_pending", "Webhook deliveries pending in the outbox, of every instance (the store is shared: aggregate with max, not sum)."),
		mcpSessions:        d("tollgate_mcp_sessions", "MCP sessions this instance holds open."),
	}
	c.src.Store(&Sources{})
	return c
}

func (c *sourceCollector) watch(s Sources) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := *c.src.Load()
	keep(&n.Settlements, s.Settlements)
	keep(&n.Usage, s.Usage)
	keep(&n.Audit, s.Audit)
	keep(&n.WebhookDispatch, s.WebhookDispatch)
	keep(&n.WebhookDelivery, s.WebhookDelivery)
	keep(&n.WebhookOutbox, s.WebhookOutbox)
	keep(&n.MCP, s.MCP)
	c.src.Store(&n)
}

// keep sets *dst to v, unless v is nil.
func keep[T comparable](dst *T, v T) {
	var none T
	if v != none {
		*dst = v
	}
}

// forget drops svc as the source of the pending settlements, if it is.
func (c *sourceCollector) forget(svc SettlementSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := *c.src.Load()
	if n.Settlements == svc {
		n.Settlements = nil
	}
	c.src.Store(&n)
}

// Describe sends every metric the collector may send, whether or not its source is
// set.
func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pendingSettlements, c.usagePending, c.usageDropped, c.auditPending, c.auditDropped,
		c.webhookQueued, c.webhookEnqueued, c.webhookDropped, c.webhookFull,
		c.webhookAttempts, c.webhookDeliveries, c.webhookDisabled, c.webhookStoreErrors,
		c.outboxPending, c.mcpSessions} {
		ch <- d
	}
}

// Collect reads the sources that are set.
func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Load()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	if s.Settlements != nil {
		gauge(c.pendingSettlements, float64(s.Settlements.Stats().PendingSettlements))
	}
	if s.Usage != nil {
		gauge(c.usagePending, float64(s.Usage.Pending()))
		counter(c.usageDropped, s.Usage.Dropped())
	}
	if s.Audit != nil {
		gauge(c.auditPending, float64(s.Audit.Pending()))
		counter(c.auditDropped, s.Audit.Dropped())
	}
	if s.WebhookDispatch != nil {
		st := s.WebhookDispatch.Stats()
		gauge(c.webhookQueued, float64(st.Queued))
		counter(c.webhookEnqueued, st.Enqueued)
		counter(c.webhookDropped, st.Dropped)
		counter(c.webhookFull, st.EndpointsFull)
	}
	if s.WebhookDelivery != nil {
		st := s.WebhookDelivery.Stats()
		counter(c.webhookAttempts, st.Attempted)
		counter(c.webhookDeliveries, st.Delivered, "delivered")
		counter(c.webhookDeliveries, st.Retried, "retried")
		counter(c.webhookDeliveries, st.Failed, "failed")
		counter(c.webhookDeliveries, st.Postponed, "postponed")
		counter(c.webhookDeliveries, st.ClaimLost, "claim_lost")
		counter(c.webhookDisabled, st.Disabled)
		counter(c.webhookStoreErrors, st.StoreErrors)
	}
	if s.WebhookOutbox != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		n, err := s.WebhookOutbox.Pending(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.outboxPending, err)
		} else {
			gauge(c.outboxPending, float64(n))
		}
	}
	if s.MCP != nil {
		gauge(c.mcpSessions, float64(s.MCP.LiveSessions()))
	}
}
