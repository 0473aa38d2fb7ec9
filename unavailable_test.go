package tollgate_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// outage is a switch that makes the stores that share it fail as a server that cannot
// be reached in time does: with an error that wraps store.ErrUnavailable and, as a
// client library's own connect timeout does, context.DeadlineExceeded, while the
// request's context is still live.
type outage struct{ down atomic.Bool }

func (o *outage) err(what string) error {
	if !o.down.Load() {
		return nil
	}
	return fmt.Errorf("%s: %w: failed to connect to 127.0.0.1:5432: failed to receive message: timeout: %w",
		what, store.ErrUnavailable, context.DeadlineExceeded)
}

// downKeys is a key store that fails while its outage lasts.
type downKeys struct {
	*memory.KeyStore
	*outage
}

func (k downKeys) Resolve(ctx context.Context, h auth.Hash) (auth.Key, auth.Account, error) {
	if err := k.err("resolving a key"); err != nil {
		return auth.Key{}, auth.Account{}, err
	}
	return k.KeyStore.Resolve(ctx, h)
}

func (k downKeys) Account(ctx context.Context, id string) (auth.Account, error) {
	if err := k.err("reading an account"); err != nil {
		return auth.Account{}, err
	}
	return k.KeyStore.Account(ctx, id)
}

func (k downKeys) Keys(ctx context.Context, q auth.KeyQuery) (auth.KeyPage, error) {
	if err := k.err("listing keys"); err != nil {
		return auth.KeyPage{}, err
	}
	return k.KeyStore.Keys(ctx, q)
}

func (k downKeys) CheckKey(ctx context.Context, c driver.KeyCheck) (driver.KeyState, error) {
	if err := k.err("checking a key"); err != nil {
		return 0, err
	}
	return k.KeyStore.CheckKey(ctx, c)
}

// downLedger is a ledger that fails while its outage lasts.
type downLedger struct {
	*memory.Ledger
	*outage
}

func (l downLedger) Reserve(ctx context.Context, r driver.Reservation) (billing.Balance, error) {
	if err := l.err("reserving"); err != nil {
		return billing.Balance{}, err
	}
	return l.Ledger.Reserve(ctx, r)
}

func (l downLedger) Adjust(ctx context.Context, a driver.Adjustment) (billing.Balance, error) {
	if err := l.err("adjusting"); err != nil {
		return billing.Balance{}, err
	}
	return l.Ledger.Adjust(ctx, a)
}

func (l downLedger) Balance(ctx context.Context, account string, now time.Time, p driver.Period, allowance int64) (billing.Balance, error) {
	if err := l.err("reading a balance"); err != nil {
		return billing.Balance{}, err
	}
	return l.Ledger.Balance(ctx, account, now, p, allowance)
}

func (l downLedger) Usage(ctx context.Context, account string, p driver.Period) (map[string]int64, error) {
	if err := l.err("reading usage"); err != nil {
		return nil, err
	}
	return l.Ledger.Usage(ctx, account, p)
}

// downRecords is an idempotency store that fails while its outage lasts.
type downRecords struct {
	*memory.IdempotencyStore
	*outage
}

func (r downRecords) Claim(ctx context.Context, c idempotency.Claim) (idempotency.Record, error) {
	if err := r.err("claiming a record"); err != nil {
		return idempotency.Record{}, err
	}
	return r.IdempotencyStore.Claim(ctx, c)
}

// TestEvery503IsLogged makes each request that a store's outage answers with
// CodeUnavailable (503) on every path of the service: a call, a query of several APIs,
// a batch, a batch with an idempotency key, a refusal, the analytics, the operator's and
// the account holder's reads, a credit grant; under a key cache or none. The stores fail
// with an error that wraps context.DeadlineExceeded, as a client library's connect
// timeout does. Each answer is logged once, with its cause, at the level its kind
// deserves, judged by the request's context: ERROR when the store failed while the
// request was live, WARN when the request's deadline had passed, INFO when its client
// had canceled it.
func TestEvery503IsLogged(t *testing.T) {
	keysDown, ledgerDown, recordsDown := &outage{}, &outage{}, &outage{}
	logs := &testenv.Logs{}
	newService := func(cached bool) *harness {
		opts := tollgate.Options{Logger: logs.Logger(),
			Idempotency: &tollgate.IdempotencyOptions{Store: downRecords{memory.NewIdempotencyStore(nil), recordsDown}}}
		if cached {
			opts.KeyCache = &auth.KeyCacheOptions{}
		}
		return newHarness(t, harnessOptions{opts: opts,
			keys:   downKeys{memory.NewKeyStore(), keysDown},
			ledger: downLedger{memory.NewLedger(nil), ledgerDown}})
	}
	plain, cached := newService(false), newService(true)
	// The cached service knows the key from a call made while the stores were up.
	if err := cached.call(t.Context(), []string{"ok"}).Err; err != nil {
		t.Fatal(err)
	}
	ok := func(*catalog.API) (tollgate.Input, error) { return tollgate.Input{JSON: map[string]any{}}, nil }

	cases := []struct {
		name string
		down *outage
		h    *harness
		do   func(ctx context.Context, h *harness) error
	}{
		{"call, key store", keysDown, plain, func(ctx context.Context, h *harness) error {
			return h.svc.Call(ctx, h.caller(), "ok", ok).Err
		}},
		{"call, ledger", ledgerDown, plain, func(ctx context.Context, h *harness) error {
			return h.svc.Call(ctx, h.caller(), "ok", ok).Err
		}},
		{"call with a cached key, key store", keysDown, cached, func(ctx context.Context, h *harness) error {
			return h.svc.Call(ctx, h.caller(), "ok", ok).Err
		}},
		{"call with a cached key, ledger", ledgerDown, cached, func(ctx context.Context, h *harness) error {
			return h.svc.Call(ctx, h.caller(), "ok", ok).Err
		}},
		{"query of several APIs, ledger", ledgerDown, plain, func(ctx context.Context, h *harness) error {
			return h.call(ctx, []string{"ok", "two"}).Err
		}},
		{"batch, ledger", ledgerDown, plain, func(ctx context.Context, h *harness) error {
			return h.batch(ctx, "ok", "", ns(1, 2)...).Err
		}},
		{"batch with an idempotency key, idempotency store", recordsDown, plain, func(ctx context.Context, h *harness) error {
			return h.batch(ctx, "ok", "k-1", ns(1, 2)...).Err
		}},
		{"refusal, key store", keysDown, plain, func(ctx context.Context, h *harness) error {
			return h.svc.CallAll(ctx, h.caller(), func() ([]tollgate.Item, error) {
				return nil, &tollgate.Error{Code: tollgate.CodeNotFound, Message: "no such path"}
			}).Err
		}},
		{"analytics, ledger", ledgerDown, plain, func(ctx context.Context, h *harness) error {
			p, err := h.svc.Authenticate(context.Background(), h.caller())
			if err != nil {
				return fmt.Errorf("authenticating while the key store is up: %w", err)
			}
			_, err = h.svc.Status(ctx, &p)
			return err
		}},
		{"analytics with a cached key, key store", keysDown, cached, func(ctx context.Context, h *harness) error {
			p, err := h.svc.Authenticate(ctx, h.caller()) // from the cache: no store
			if err != nil {
				return fmt.Errorf("authenticating from the cache: %w", err)
			}
			_, err = h.svc.Status(ctx, &p)
			return err
		}},
		{"operator's account read, key store", keysDown, plain, func(ctx context.Context, h *harness) error {
			_, err := h.mgr.Account(ctx, "acct")
			return err
		}},
		{"account holder's read, ledger", ledgerDown, plain, func(ctx context.Context, h *harness) error {
			_, err := h.mgr.OwnAccount(ctx, h.caller())
			return err
		}},
		{"credit grant, ledger", ledgerDown, plain, func(ctx context.Context, h *harness) error {
			_, err := h.mgr.AdjustCredits(ctx, "acct", 10, "goodwill", nil)
			return err
		}},
	}
	contexts := []struct {
		name  string
		level string
		ctx   func() context.Context
	}{
		{"live request", "ERROR", func() context.Context { return t.Context() }},
		{"deadline passed", "WARN", func() context.Context {
			ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}},
		{"client canceled", "INFO", func() context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}},
	}
	for _, tc := range cases {
		for _, cx := range contexts {
			t.Run(tc.name+"/"+cx.name, func(t *testing.T) {
				before := len(logs.Records(t))
				tc.down.down.Store(true)
				err := tc.do(cx.ctx(), tc.h)
				tc.down.down.Store(false)
				if tollgate.CodeOf(err) != tollgate.CodeUnavailable {
					t.Fatalf("error %v, want CodeUnavailable (503)", err)
				}
				// The cause logged is the store's error: the outage's, or, for a request
				// that had ended, the context's error a store may answer first.
				got := logs.Records(t)[before:]
				cause := "failed to connect"
				if cx.level != "ERROR" {
					cause = ""
				}
				if len(got) != 1 || got[0].Level != cx.level || got[0].Attrs["error"] == nil || !strings.Contains(fmt.Sprint(got[0].Attrs["error"]), cause) {
					t.Errorf("the 503 (%v) logged %+v; want one record at %s with the store's error", err, got, cx.level)
				}
			})
		}
	}
}
