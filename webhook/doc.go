// Package webhook tells account holders and operators what happened to their keys,
// credits and accounts: it turns the service's events into typed webhook events, keeps
// them in a durable outbox, and delivers them to the endpoints that asked for them,
// signed by the Standard Webhooks scheme, at least once, retried on a schedule.
//
// The outbox and the endpoints live in a [Store], shared by every instance: any
// instance may deliver what another enqueued, a delivery is claimed by one deliverer at
// a time, and a message survives the instance that enqueued it.
package webhook
