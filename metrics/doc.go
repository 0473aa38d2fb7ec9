// Package metrics exposes what a Tollgate service does as Prometheus metrics: the calls
// by API, door and outcome, their latency with the admission, the handler and the
// settlement told apart, the credits charged, the refusals by code, the settlements that
// were deferred or voided, the reservations the sweep voided, the latency and the
// failures of the stores' operations, and the depth of the queues the service keeps in
// the background (settlements, usage rows, audit entries, webhook messages) with what
// they dropped. docs/metrics.md is the reference of every metric, and
// docs/grafana/tollgate.json a Grafana dashboard of them.
//
// The call core does not import this package: it observes the service through its seam,
// the event bus (package event), as the audit log and the usage statistics do, and reads
// the other figures through small interfaces when it is scraped:
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg, nil)
//	stores = m.Stores(stores) // optional: the stores' latency and failures
//	svc, err := tollgate.New(registry, stores, plans, opts)
//	detach := m.Attach(svc)   // the calls, refusals, sweeps and pending settlements
//	m.Watch(metrics.Sources{Usage: recorder, Audit: auditLog, MCP: mcpHandler})
//	opsMux.Handle("GET /metrics", metrics.Handler(reg))
//
// # Labels
//
// No label ever holds a key, a key id or an account id, or anything else a caller
// chooses, unless the host asks for it: the APIs are those of the catalog (an event
// names no API the catalog does not have), the doors, codes, phases and settlements are
// fixed sets, and the stores and operations are named by the code. So the number of
// series is bounded by the catalog, whatever the traffic. [Options.AccountLabel] adds an
// account label to the call, credit and refusal counters, for a host that knows how many
// accounts it has and wants their series (or buckets them itself).
//
// # Why client_golang, not the OpenTelemetry metrics API
//
// The metrics are registered on a prometheus.Registerer the host passes, with
// github.com/prometheus/client_golang, rather than recorded through the OpenTelemetry
// metrics API and exported by its Prometheus exporter:
//
//   - Prometheus is where these figures are read (its scrape, its alerting rules, the
//     Grafana dashboard), and client_golang writes its exposition format directly, with
//     the metric names, units and label sets this package documents; the OpenTelemetry
//     exporter translates names and units (suffixes, dots to underscores, a target_info
//     metric, scope labels), so the names an operator queries would be the exporter's
//     choice, and could change with it.
//   - A host that already serves /metrics (most Go services do, with client_golang)
//     registers these beside its own on the registry it has; one that wants Tollgate's
//     apart passes a registry of its own.
//   - The hot path stays cheap and free of allocations: the series of a label set are
//     looked up once and kept, and each call updates them with atomic additions; the
//     OpenTelemetry API takes the attributes with every measurement, and its SDK looks
//     their aggregation up by them each time (and allocates them, unless the caller
//     keeps prepared sets). The package's benchmarks give the cost per call
//     (docs/metrics.md, "Cost").
//   - It is one module and the few it requires (client_model, common, procfs,
//     protobuf), already in the build of most Go services; the OpenTelemetry metrics
//     SDK and its Prometheus exporter are several modules that move together, and
//     client_golang besides.
//
// Traces are another matter: they are OpenTelemetry's (spans, context propagation), and
// nothing here stands in their way. A host that wants these metrics in an OpenTelemetry
// pipeline scrapes /metrics with the collector's Prometheus receiver.
package metrics
