package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// scenario runs a paid call's traffic on s: an account and its balance, an admission
// and a settlement, and checks the balance.
func scenario(t *testing.T, s *postgres.Store, id string) {
	t.Helper()
	ctx := t.Context()
	acct, key := fixture(id)
	if err := s.CreateAccount(ctx, acct, key); err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if err := s.Open(ctx, driver.Opening{Account: id, Balance: 10, Allowance: 10, Period: period}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	req := driver.RequestID{9}
	r, err := s.Admit(ctx, driver.Step{Account: id, Request: req, Now: t0,
		Key:     &driver.KeyCheck{Account: id, KeyID: key.ID, Hash: key.Hash},
		Slot:    &driver.SlotClaim{Ceiling: 1, Lease: time.Minute},
		Credits: &driver.Reservation{Account: id, Request: req, APIs: []string{"hash"}, Amount: 4, Period: period, Allowance: 10, Now: t0, Expires: t0.Add(time.Hour)}})
	if err != nil || r.Denied != driver.NotDenied || r.Balance.Remaining != 6 {
		t.Fatalf("Admit: %+v, %v; want admitted with 6 remaining", r, err)
	}
	b, err := s.Close(ctx, driver.Closing{Account: id, Request: req, ReleaseSlot: true,
		Settlement: &driver.Settlement{Account: id, Request: req, Refund: 1, Period: period, Allowance: 10}})
	if err != nil || b.Remaining != 7 {
		t.Fatalf("Close: %+v, %v; want 7 remaining", b, err)
	}
}

// TestDBKinds runs the store on each kind of DB: a pool, a single connection, and a
// host's transaction (whose rollback undoes everything the store did in it).
func TestDBKinds(t *testing.T) {
	pool := newPool(t, 4)
	schema := pool.Config().ConnConfig.RuntimeParams["search_path"]

	t.Run("Pool", func(t *testing.T) {
		s, err := postgres.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		scenario(t, s, "on-pool")
	})

	t.Run("Conn", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(dsn(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["search_path"] = schema
		conn, err := pgx.ConnectConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		s, err := postgres.New(conn, nil)
		if err != nil {
			t.Fatal(err)
		}
		scenario(t, s, "on-conn")
	})

	t.Run("Tx", func(t *testing.T) {
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())
		s, err := postgres.New(tx, nil)
		if err != nil {
			t.Fatal(err)
		}
		scenario(t, s, "on-tx")
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		outside, _ := postgres.New(pool, nil)
		if _, err := outside.Account(t.Context(), "on-tx"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Account after the host rolled back its transaction: %v, want store.ErrNotFound", err)
		}
	})
}

// TestErrorMapping checks how errors are reported: a missing row wraps
// store.ErrNotFound, a unique violation store.ErrConflict, anything else
// store.ErrUnavailable (still matching the cause, a context error or a *pgconn.PgError),
// and every message starts with "postgres: " and names the id.
func TestErrorMapping(t *testing.T) {
	s := newStore(t, nil)
	ctx := t.Context()
	acct, key := fixture("mapped")
	if err := s.CreateAccount(ctx, acct, key); err != nil {
		t.Fatal(err)
	}

	_, err := s.Account(ctx, "ghost")
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Account(ghost): %v, want store.ErrNotFound only", err)
	}
	wantMessage(t, err, `postgres: account "ghost"`)

	dup := key
	dup.ID = "mapped-other"
	err = s.CreateKey(ctx, dup, auth.KeyLimit{})
	if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("CreateKey with a taken hash: %v, want store.ErrConflict only", err)
	}
	wantMessage(t, err, `postgres: key "mapped-other"`)

	_, err = s.Reserve(ctx, driver.Reservation{Account: "ghost", Request: driver.RequestID{1}, Amount: 1, Period: period, Now: t0, Expires: t0.Add(time.Hour)})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Reserve on an account without a balance: %v, want store.ErrNotFound", err)
	}
	wantMessage(t, err, `postgres: balance of account "ghost"`)

	expired, cancel := context.WithDeadline(ctx, time.Time{}) // long past
	defer cancel()
	_, err = s.Admit(expired, driver.Step{Account: "mapped", Now: t0})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Admit with an expired deadline: %v, want context.DeadlineExceeded and store.ErrUnavailable", err)
	}
	wantMessage(t, err, `postgres: admission`)

	// A server error (here: the schema has no such function) is "unavailable", and the
	// *pgconn.PgError is still there for the host's logs.
	broken, _ := postgres.New(brokenDB{newPool(t, 2)}, nil)
	_, err = broken.Balance(ctx, "mapped", t0, period, 10)
	var pe *pgconn.PgError
	if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &pe) {
		t.Errorf("Balance on a schema without the functions: %v, want store.ErrUnavailable wrapping a *pgconn.PgError", err)
	}
	wantMessage(t, err, `postgres: balance of account "mapped"`)
}

// brokenDB runs every statement with a search_path that has none of the store's tables.
type brokenDB struct{ *pgxpool.Pool }

func (b brokenDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return b.Pool.QueryRow(ctx, strings.ReplaceAll(sql, "tollgate_", "tollgate_missing_"), args...)
}

// TestUnreachable checks that a store whose server cannot be reached fails closed: every
// admission is an error wrapping store.ErrUnavailable (nothing is admitted), and the
// message names the call.
func TestUnreachable(t *testing.T) {
	dsn(t) // only with the other PostgreSQL tests
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, _ := postgres.New(pool, nil)
	req := driver.RequestID{1}
	_, err = s.Admit(t.Context(), driver.Step{Account: "acct", Request: req, Now: t0,
		Credits: &driver.Reservation{Account: "acct", Request: req, Amount: 1, Period: period, Now: t0, Expires: t0.Add(time.Hour)}})
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		t.Errorf("Admit with the server unreachable: %v, want store.ErrUnavailable", err)
	}
	wantMessage(t, err, `postgres: admission 01000000000000000000000000000000 of account "acct"`)
}

// TestCanceledMidCall cancels a reservation while it waits inside the server (for a row
// lock the test holds): the call returns an error matching context.DeadlineExceeded,
// the server abandons the statement, and nothing is charged.
func TestCanceledMidCall(t *testing.T) {
	pool := newPool(t, 4)
	s, _ := postgres.New(pool, nil)
	ctx := t.Context()
	if err := s.Open(ctx, driver.Opening{Account: "locked", Balance: 10, Allowance: 10, Period: period}); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT 1 FROM tollgate_balance_shards WHERE account_id = 'locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = s.Reserve(short, driver.Reservation{Account: "locked", Request: driver.RequestID{1}, Amount: 3, Period: period, Allowance: 10, Now: t0, Expires: t0.Add(time.Hour)})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Reserve that outlived its deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := s.Balance(ctx, "locked", t0, period, 10)
	if err != nil || b.Remaining != 10 || b.Used != 0 {
		t.Errorf("after the canceled Reserve: %+v, %v; want 10 remaining, nothing used", b, err)
	}
	// The request was not recorded: it goes through now.
	b, err = s.Reserve(ctx, driver.Reservation{Account: "locked", Request: driver.RequestID{1}, Amount: 3, Period: period, Allowance: 10, Now: t0, Expires: t0.Add(time.Hour)})
	if err != nil || b.Remaining != 7 {
		t.Errorf("Reserve after the canceled one: %+v, %v; want 7 remaining", b, err)
	}
}
