package redis_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/meter"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// names returns the command names of recorded commands.
func names(cmds [][]any) []string {
	out := make([]string, len(cmds))
	for i, args := range cmds {
		out[i], _ = keysOf(args)
	}
	return out
}

// A counting client: one connection, so that no handshake of a new connection shows
// among the counted commands, and a hook that records every command (a pipeline would
// show as its commands; the Store sends none).
func countingClient(t *testing.T) (*goredis.Client, *recorder) {
	rec := &recorder{}
	c := newClient(addr(t), func(o *goredis.Options) { o.PoolSize, o.MinIdleConns = 1, 0 })
	t.Cleanup(func() { c.Close() })
	must(t, c.Ping(t.Context()).Err())
	c.AddHook(rec)
	return c, rec
}

// TestOneRoundTripEach checks the round-trip budget of a paid call through a
// meter.Meter: exactly one command to admit (one EVALSHA) and one to settle, both
// with every role in Redis (key check, rate, slot, credits; the settlement is a script
// too), also through a decorator of the whole Store, and with only the limits in Redis (keys and credits elsewhere, here in memory;
// freeing the slot is a ZREM). The scripts are loaded by a first call; the counted
// calls run after it.
func TestOneRoundTripEach(t *testing.T) {
	plan := billing.Plan{Name: "pro", Credits: 1000, RatePerMinute: 600, Concurrency: 10}
	period := driver.MonthOf(time.Now())

	compositions := []struct {
		name   string
		settle string // the command that settles
		meter  func(t *testing.T, s *redis.Store, acct string) (*meter.Meter, *driver.KeyCheck)
	}{
		{"everything in Redis", "evalsha", func(t *testing.T, s *redis.Store, acct string) (*meter.Meter, *driver.KeyCheck) {
			key := auth.Key{ID: acct + "-key", AccountID: acct, Name: "primary", Primary: true, Hash: newHash()}
			must(t, s.CreateAccount(t.Context(), auth.Account{ID: acct, Plan: plan.Name}, key))
			must(t, s.Open(t.Context(), driver.Opening{Account: acct, Balance: 1000, Allowance: 1000, Period: period}))
			m, err := meter.New(s, s, s, &meter.Options{Keys: s})
			must(t, err)
			return m, &driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}
		}},
		{"everything in Redis, decorated", "evalsha", func(t *testing.T, s *redis.Store, acct string) (*meter.Meter, *driver.KeyCheck) {
			key := auth.Key{ID: acct + "-key", AccountID: acct, Name: "primary", Primary: true, Hash: newHash()}
			must(t, s.CreateAccount(t.Context(), auth.Account{ID: acct, Plan: plan.Name}, key))
			must(t, s.Open(t.Context(), driver.Opening{Account: acct, Balance: 1000, Allowance: 1000, Period: period}))
			d := &decorated{Store: s}
			t.Cleanup(func() {
				if n := d.steps.Load(); n != 8 {
					t.Errorf("%d steps through the decorator, want 8: it sees every admission and settlement", n)
				}
			})
			m, err := meter.New(d, d, d, &meter.Options{Keys: d})
			must(t, err)
			return m, &driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}
		}},
		{"calls that reach the grants", "evalsha", func(t *testing.T, s *redis.Store, acct string) (*meter.Meter, *driver.KeyCheck) {
			// One credit of the allowance left, and 999 granted in two lots: every call
			// after the first takes from the lots.
			key := auth.Key{ID: acct + "-key", AccountID: acct, Name: "primary", Primary: true, Hash: newHash()}
			must(t, s.CreateAccount(t.Context(), auth.Account{ID: acct, Plan: plan.Name}, key))
			must(t, s.Open(t.Context(), driver.Opening{Account: acct, Balance: 1, Allowance: 1000, Period: period}))
			for i, lot := range []struct {
				credits int64
				expires time.Time
			}{{2, time.Now().Add(time.Hour)}, {997, time.Time{}}} {
				_, err := s.Adjust(t.Context(), driver.Adjustment{Account: acct, Request: driver.RequestID{0xff, byte(i)}, Amount: lot.credits,
					Expires: lot.expires, Reason: "top-up", Period: period, Allowance: 1000, Now: time.Now()})
				must(t, err)
			}
			m, err := meter.New(s, s, s, &meter.Options{Keys: s})
			must(t, err)
			return m, &driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}
		}},
		{"limits in Redis", "zrem", func(t *testing.T, s *redis.Store, acct string) (*meter.Meter, *driver.KeyCheck) {
			keys, ledger := memory.NewKeyStore(), memory.NewLedger(nil)
			key := auth.Key{ID: acct + "-key", AccountID: acct, Name: "primary", Primary: true, Hash: newHash()}
			must(t, keys.CreateAccount(t.Context(), auth.Account{ID: acct, Plan: plan.Name}, key))
			must(t, ledger.Open(t.Context(), driver.Opening{Account: acct, Balance: 1000, Allowance: 1000, Period: period}))
			m, err := meter.New(ledger, s, s, &meter.Options{Keys: keys})
			must(t, err)
			return m, &driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: key.Hash}
		}},
	}
	for _, comp := range compositions {
		t.Run(comp.name, func(t *testing.T) {
			c, rec := countingClient(t)
			s := newStoreOn(t, c, &redis.Options{}) // the server's clock, as in production
			m, key := comp.meter(t, s, "acct")
			call := func(i int) ([]string, []string) {
				a := meter.Admission{Account: "acct", Plan: plan, Request: driver.RequestID{byte(i), 1}, APIs: []string{"hash"},
					Cost: 1, Now: time.Now(), Key: key}
				rec.take()
				tk, err := m.Admit(t.Context(), a)
				must(t, err)
				admit := names(rec.take())
				if !tk.HoldsSlot() {
					t.Fatalf("call %d holds no slot", i)
				}
				b, err := m.Settle(t.Context(), &tk, meter.Outcome{Now: time.Now()})
				must(t, err)
				if b.Remaining != int64(1000-i) {
					t.Errorf("call %d: remaining %d after settlement, want %d", i, b.Remaining, 1000-i)
				}
				return admit, names(rec.take())
			}
			call(1) // loads the scripts
			for i := 2; i <= 4; i++ {
				admit, settle := call(i)
				if !slices.Equal(admit, []string{"evalsha"}) || !slices.Equal(settle, []string{comp.settle}) {
					t.Errorf("call %d: admission sent %q and settlement %q; want [evalsha] and [%s]", i, admit, settle, comp.settle)
				}
			}
		})
	}
}

// decorated decorates the whole Store, as a metrics wrapper does (see driver.Wrapper):
// it embeds it, so that it plays every role the Store plays, and counts the steps it
// forwards.
type decorated struct {
	*redis.Store
	steps atomic.Int64
}

func (d *decorated) Admit(ctx context.Context, s driver.Step) (driver.StepResult, error) {
	d.steps.Add(1)
	return d.Store.Admit(ctx, s)
}

func (d *decorated) Close(ctx context.Context, c driver.Closing) (driver.Balance, error) {
	d.steps.Add(1)
	return d.Store.Close(ctx, c)
}

func (d *decorated) Unwrap() any { return d.Store }

// TestCanceledContextSendsNothing checks that a method given a canceled context sends
// no command at all: it fails before it uses the connection, and so cannot have
// changed anything.
func TestCanceledContextSendsNothing(t *testing.T) {
	c, rec := countingClient(t)
	s := newStoreOn(t, c, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec.take()
	errs := everyMethod(ctx, s)
	for name, err := range errs {
		if !isCanceled(err) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}
	if sent := rec.take(); len(sent) != 0 {
		t.Errorf("methods given a canceled context sent %d commands: %q", len(sent), names(sent))
	}
}

func isCanceled(err error) bool { return errors.Is(err, context.Canceled) }
