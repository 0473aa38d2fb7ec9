// Package webhook tells account holders and operators what happened to their keys,
// credits and accounts: it turns the service's events into typed webhook events, keeps
// them in a durable outbox, and delivers them to the endpoints that asked for them,
// signed by the Standard Webhooks scheme, at least once, retried on a schedule.
//
// Owners manage their endpoints through [Endpoints]: an account's holder those of the
// account (package selfservice serves them), the operator their own, which receive
// every account's events, and an account's (package admin). It checks what an endpoint
// may be, shows a secret only when it makes one, sends test messages and deliveries
// again, and publishes every change on the service's events, for the audit log.
//
// The outbox and the endpoints live in a [Store], shared by every instance: any
// instance may deliver what another enqueued, a delivery is claimed by one deliverer at
// a time, and a message survives the instance that enqueued it.
//
// A [Deliverer] delivers the outbox: run one on every instance (or on some). It claims
// the deliveries that are due, posts each message, signed, to its endpoint's URL,
// retries the failures on a [Schedule] (by default ten attempts over about three
// days), shares its attempts among the endpoints and the accounts (an endpoint with a
// backlog or a slow receiver takes its share, never every attempt), holds back the
// deliveries to an endpoint that does not answer (they wait, without spending their
// attempts: the store takes a delivery back without one), and disables
// an endpoint that answers 410 Gone or that failed every delivery for the whole
// schedule (which the store's [Endpoint.LastDelivered] tells exactly). It runs on goroutines of its own and never slows the
// service's calls; the rules of an attempt (what is sent, what succeeds, which
// destinations are refused) are [Deliverer]'s documentation.
//
// A [Dispatcher] turns the service's events into messages in the outbox: calls past a
// threshold of the allowance, refusals, and the changes [Translate] translates. Given
// the service's key store and ledger, it also sweeps them, in turn with the other
// instances, for what happens with nobody calling: the keys that reach their expiry
// (key.expired) and the periods that renew (period.renewed).
//
// [New] assembles the three for a service, on its events, wired together: the
// dispatcher's messages wake the deliverer, an endpoint the deliverer disables is
// published (and told to the owner's other endpoints, and to the operator's), and a
// deleted account's endpoints are deleted. Each part stays usable on its own.
//
// An endpoint keeps who disabled it ([Endpoint.DisabledBy]): an account's endpoint
// that the operator disabled stays disabled until the operator enables it, whatever its
// holder asks ([Endpoints.Update]). An [Endpoint] logged (log/slog) or printed (fmt)
// never shows its secrets.
package webhook
