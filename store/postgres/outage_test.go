package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/health"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestOutage stops the database under a running store (a private server the test
// starts, so that it may stop it): admissions and settlements fail with
// store.ErrUnavailable and nothing is admitted or charged; once the server is back, the
// same Store and pool serve again without being recreated, and a retried admission with
// the same request id is charged once. Every store's Ping fails during the outage, with
// store.ErrUnavailable, and answers nil after it.
func TestOutage(t *testing.T) {
	dsn(t) // only with the other PostgreSQL tests
	srv := testenv.StartPostgres(t)
	cfg, err := postgres.PoolConfig(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := t.Context()
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s, _ := postgres.New(pool, nil)
	acct, key := fixture("outage")
	if err := s.CreateAccount(ctx, acct, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, driver.Opening{Account: acct.ID, Balance: 10, Allowance: 10, Period: period}); err != nil {
		t.Fatal(err)
	}
	step := func(req driver.RequestID) driver.Step {
		return driver.Step{Account: acct.ID, Request: req, Now: t0,
			Key:     &driver.KeyCheck{Account: acct.ID, KeyID: key.ID, Hash: key.Hash},
			Slot:    &driver.SlotClaim{Ceiling: 5, Lease: time.Minute},
			Credits: &driver.Reservation{Account: acct.ID, Request: req, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 10, Now: t0, Expires: t0.Add(time.Hour)}}
	}
	first := newRequest()
	if r, err := s.Admit(ctx, step(first)); err != nil || r.Denied != driver.NotDenied {
		t.Fatalf("Admit before the outage: %+v, %v", r, err)
	}

	srv.Stop()
	// A readiness check sees the outage: every store of the pool fails its Ping.
	for name, p := range pingers(t, pool, s) {
		call, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := p.Ping(call)
		cancel()
		if !errors.Is(err, store.ErrUnavailable) || !strings.HasPrefix(err.Error(), "postgres: ping: ") {
			t.Errorf("%s.Ping during the outage: %v, want an error beginning postgres: ping: and wrapping store.ErrUnavailable", name, err)
		}
	}
	second := newRequest()
	for range 3 {
		call, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.Admit(call, step(second))
		cancel()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Admit during the outage: %v, want store.ErrUnavailable", err)
		}
		_, err = s.Close(ctx, driver.Closing{Account: acct.ID, Request: first, ReleaseSlot: true,
			Settlement: &driver.Settlement{Account: acct.ID, Request: first, Refund: 1, Period: period, Allowance: 10}})
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Close during the outage: %v, want store.ErrUnavailable", err)
		}
	}

	srv.Start()
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = testenv.Wait(wait, func() error {
		r, err := s.Admit(ctx, step(second)) // retried with the same request: charged once
		if err == nil && r.Denied != driver.NotDenied {
			t.Fatalf("Admit after the outage: %+v", r)
		}
		return err
	})
	if err != nil {
		t.Fatalf("the store did not serve again after the outage: %v", err)
	}
	for name, p := range pingers(t, pool, s) {
		if err := p.Ping(ctx); err != nil {
			t.Errorf("%s.Ping after the outage: %v", name, err)
		}
	}
	b, err := s.Balance(ctx, acct.ID, t0, period, 10)
	if err != nil || b.Remaining != 8 {
		t.Errorf("balance after the outage: %+v, %v; want 8 remaining (two admissions, nothing charged during the outage)", b, err)
	}
	n, err := s.InUse(ctx, acct.ID, t0)
	if err != nil || n != 2 {
		t.Errorf("slots in use after the outage: %d, %v; want 2", n, err)
	}
}

// pingers returns every store of the package on pool, by name; s is the Store.
func pingers(t *testing.T, pool *pgxpool.Pool, s *postgres.Store) map[string]health.Pinger {
	t.Helper()
	ps := map[string]health.Pinger{"Store": s}
	add := func(name string, p health.Pinger, err error) {
		if err != nil {
			t.Fatal(err)
		}
		ps[name] = p
	}
	audit, err := postgres.NewAuditStore(pool)
	add("AuditStore", audit, err)
	idem, err := postgres.NewIdempotencyStore(pool)
	add("IdempotencyStore", idem, err)
	oauth, err := postgres.NewOAuthStore(pool)
	add("OAuthStore", oauth, err)
	sessions, err := postgres.NewSessionStore(pool)
	add("SessionStore", sessions, err)
	usage, err := postgres.NewUsageStore(pool)
	add("UsageStore", usage, err)
	hooks, err := postgres.NewWebhookStore(pool, nil)
	add("WebhookStore", hooks, err)
	return ps
}
