package memory

import (
	"context"

	"github.com/tollgate-dev/tollgate/health"
)

// Every store of the package answers health.Pinger: the memory of the process is
// always reachable.
var (
	_ health.Pinger = (*KeyStore)(nil)
	_ health.Pinger = (*Ledger)(nil)
	_ health.Pinger = (*RateLimiter)(nil)
	_ health.Pinger = (*ConcurrencyLimiter)(nil)
	_ health.Pinger = (*SessionStore)(nil)
	_ health.Pinger = (*AuditStore)(nil)
	_ health.Pinger = (*UsageStore)(nil)
	_ health.Pinger = (*IdempotencyStore)(nil)
	_ health.Pinger = (*OAuthStore)(nil)
	_ health.Pinger = (*WebhookStore)(nil)
)

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *KeyStore) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (l *Ledger) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (r *RateLimiter) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (c *ConcurrencyLimiter) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *SessionStore) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *AuditStore) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *UsageStore) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *IdempotencyStore) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *OAuthStore) Ping(context.Context) error { return nil }

// Ping returns nil: the store is in the process's memory (see health.Pinger).
func (s *WebhookStore) Ping(context.Context) error { return nil }
