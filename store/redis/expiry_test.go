package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// dieAfter lets the first commands of a client reach Redis and fails every command
// after them without sending it, as if the instance had been killed there.
type dieAfter struct{ left atomic.Int64 }

var errKilled = errors.New("the instance was killed")

func (h *dieAfter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *dieAfter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if h.left.Add(-1) < 0 {
			cmd.SetErr(errKilled)
			return errKilled
		}
		return next(ctx, cmd)
	}
}

func (h *dieAfter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		sent := 0
		for range cmds {
			if h.left.Add(-1) < 0 {
				break
			}
			sent++
		}
		for _, c := range cmds[sent:] {
			c.SetErr(errKilled)
		}
		if sent == 0 {
			return errKilled
		}
		err := next(ctx, cmds[:sent])
		if sent < len(cmds) && err == nil {
			err = errKilled
		}
		return err
	}
}

// killed reports whether the hook failed a command.
func (h *dieAfter) killed() bool { return h.left.Load() < 0 }

// TestKilledBetweenCommands kills an instance after each command that an admission or
// a reservation sends, in turn, and checks that another instance's sweep gives back
// whatever the killed one reserved, once its reservation has expired: a reservation
// never commits before the index of expiring accounts can find it. Each case starts from
// an account in another state: new, with an open reservation that expires later than
// the new one (the new one lowers its earliest deadline), and with every reservation
// settled and swept (its entry in the index removed).
func TestKilledBetweenCommands(t *testing.T) {
	c := client(t)
	now := testNow
	period := driver.MonthOf(now)
	reservation := func(acct string, req driver.RequestID, amount int64, at time.Time, hold time.Duration) driver.Reservation {
		return driver.Reservation{Account: acct, Request: req, APIs: []string{"hash"}, Amount: amount, Period: period,
			Allowance: 100, Now: at, Expires: at.Add(hold)}
	}
	ops := []struct {
		name string
		do   func(ctx context.Context, s *redis.Store, r driver.Reservation) error
	}{
		{"Admit", func(ctx context.Context, s *redis.Store, r driver.Reservation) error {
			_, err := s.Admit(ctx, driver.Step{Account: r.Account, Request: r.Request, Now: r.Now, Credits: &r})
			return err
		}},
		{"Reserve", func(ctx context.Context, s *redis.Store, r driver.Reservation) error {
			_, err := s.Reserve(ctx, r)
			return err
		}},
	}
	setups := []struct {
		name string
		// setup prepares the account on a healthy instance and returns the balance it
		// leaves (remaining, used) as read before the new reservation expires.
		setup func(t *testing.T, s *redis.Store) (int64, int64)
	}{
		{"new", func(*testing.T, *redis.Store) (int64, int64) { return 100, 0 }},
		{"later reservation open", func(t *testing.T, s *redis.Store) (int64, int64) {
			_, err := s.Reserve(t.Context(), reservation("a", newRequest(), 5, now, 10*time.Minute))
			must(t, err)
			return 95, 5
		}},
		{"settled and swept", func(t *testing.T, s *redis.Store) (int64, int64) {
			ctx, req := t.Context(), newRequest()
			_, err := s.Reserve(ctx, reservation("a", req, 5, now.Add(-time.Hour), time.Minute))
			must(t, err)
			_, err = s.Settle(ctx, driver.Settlement{Account: "a", Request: req, Period: period, Allowance: 100, Now: now.Add(-time.Hour)})
			must(t, err)
			_, err = s.Sweep(ctx, now.Add(-time.Minute), 100)
			must(t, err)
			return 95, 5
		}},
	}
	for _, op := range ops {
		for _, setup := range setups {
			t.Run(op.name+"/"+setup.name, func(t *testing.T) {
				for k := int64(0); ; k++ {
					ctx := t.Context()
					prefix := newPrefix(t, c)
					healthy := openStore(t, c, prefix, nil)
					must(t, healthy.Open(ctx, driver.Opening{Account: "a", Balance: 100, Allowance: 100, Period: period}))
					remaining, used := setup.setup(t, healthy)

					h := &dieAfter{}
					h.left.Store(k)
					dc := newClient(addr(t), nil)
					dc.AddHook(h)
					dying := openStore(t, dc, prefix, &redis.Options{CallerClock: true, Batch: 1})
					err := op.do(ctx, dying, reservation("a", newRequest(), 10, now, time.Minute))
					dc.Close()
					if !h.killed() {
						must(t, err)
						if k == 0 {
							t.Fatal("the operation sent no command")
						}
						return // every command went out: each cut was tried
					}
					if !errors.Is(err, errKilled) {
						t.Errorf("killed after %d commands: %s returned %v, want the error of the command that failed", k, op.name, err)
					}

					if _, err := healthy.Sweep(ctx, now.Add(2*time.Minute), 100); err != nil {
						t.Fatalf("killed after %d commands: Sweep: %v", k, err)
					}
					// Read before the expiry, so that the read itself voids nothing.
					b, err := healthy.Balance(ctx, "a", now.Add(30*time.Second), period, 100)
					must(t, err)
					if b.Remaining != remaining || b.Used != used {
						t.Errorf("killed after %d commands, then swept: remaining %d, used %d; want %d and %d (the credits held for good)",
							k, b.Remaining, b.Used, remaining, used)
					}
				}
			})
		}
	}
}

// TestSweepRemovesSettledEntries checks that the entries of the index of expiring
// accounts whose reservations were all settled are removed by the first sweep after
// their deadline, all of them, even when a sweep voids nothing: the index does not grow
// with the accounts that ever made a call, and no sweep stops at them.
func TestSweepRemovesSettledEntries(t *testing.T) {
	c := client(t)
	s := newStoreOn(t, c, nil)
	ctx := t.Context()
	period := driver.MonthOf(testNow)
	const accounts = 300 // more than a page of the index
	for i := range accounts {
		acct := "acct" + strconv.Itoa(i)
		must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: period}))
		req := newRequest()
		_, err := s.Reserve(ctx, driver.Reservation{Account: acct, Request: req, APIs: []string{"hash"}, Amount: 1,
			Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Minute)})
		must(t, err)
		_, err = s.Settle(ctx, driver.Settlement{Account: acct, Request: req, Period: period, Allowance: 100, Now: testNow})
		must(t, err)
	}
	if n := indexSize(t, c, s); n != accounts {
		t.Fatalf("the index holds %d entries, want one per account, %d", n, accounts)
	}
	voided, err := s.Sweep(ctx, testNow.Add(time.Hour), 10)
	must(t, err)
	if voided != 0 {
		t.Errorf("Sweep voided %d settled reservations", voided)
	}
	if n := indexSize(t, c, s); n != 0 {
		t.Errorf("after the sweep, the index holds %d entries of accounts with no open reservation, want 0", n)
	}
	// The accounts are indexed again by their next reservations.
	_, err = s.Reserve(ctx, driver.Reservation{Account: "acct0", Request: newRequest(), Amount: 1,
		Period: period, Allowance: 100, Now: testNow.Add(time.Hour), Expires: testNow.Add(time.Hour + time.Minute)})
	must(t, err)
	if voided, err := s.Sweep(ctx, testNow.Add(2*time.Hour), 10); err != nil || voided != 1 {
		t.Errorf("Sweep after a new reservation expired: %d voided, %v; want 1", voided, err)
	}
}

// TestIndexCoversOpenReservations runs reservations, settlements and sweeps of a few
// accounts from many goroutines at once, with holds of many lengths (so that new
// reservations are often due before the others), and then checks what sweeps rely on:
// every open reservation is found by an entry of the index of expiring accounts scored
// no later than its deadline, and a sweep after every deadline gives back every
// credit still held.
func TestIndexCoversOpenReservations(t *testing.T) {
	c := client(t)
	s, prefix := newStorePrefix(t, c, nil)
	ctx := t.Context()
	period := driver.MonthOf(testNow)
	accounts := []string{"a", "b", "c", "d"}
	for _, acct := range accounts {
		must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: 1_000_000, Allowance: 1_000_000, Period: period}))
	}
	type held struct {
		acct string
		req  driver.RequestID
	}
	open := make(chan held, 4096)
	var clock atomic.Int64 // milliseconds after testNow, moved by every operation
	now := func() time.Time { return testNow.Add(time.Duration(clock.Add(1)) * time.Millisecond) }
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				acct := accounts[(g+i)%len(accounts)]
				at := now()
				r := driver.Reservation{Account: acct, Request: newRequest(), APIs: []string{"hash"}, Amount: 1,
					Period: period, Allowance: 1_000_000, Now: at, Expires: at.Add(time.Duration(1+(i*7)%50) * 100 * time.Millisecond)}
				var err error
				if i%2 == 0 {
					_, err = s.Reserve(ctx, r)
				} else {
					_, err = s.Admit(ctx, driver.Step{Account: acct, Request: r.Request, Now: at, Credits: &r})
				}
				if err != nil {
					t.Errorf("reservation: %v", err)
					return
				}
				open <- held{acct, r.Request}
			}
		})
	}
	done := make(chan struct{})
	var settlers sync.WaitGroup
	for range 2 {
		settlers.Go(func() {
			for h := range open {
				_, err := s.Settle(ctx, driver.Settlement{Account: h.acct, Request: h.req, Period: period, Allowance: 1_000_000, Now: now()})
				if err != nil && !errors.Is(err, driver.ErrVoided) {
					t.Errorf("Settle: %v", err)
				}
			}
		})
		settlers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.Sweep(ctx, now(), 7); err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	// Half the reservations stay open: the settlers stop taking them.
	for range len(open) / 2 {
		<-open
	}
	close(open)
	settlers.Wait()

	entries := indexEntries(t, c, s)
	for _, acct := range accounts {
		first, err := c.ZRangeWithScores(ctx, prefix+":{"+acct+"}:open", 0, 0).Result()
		must(t, err)
		if len(first) == 0 {
			continue
		}
		found := false
		for _, e := range entries {
			if strings.HasPrefix(e.Member.(string), acct+"\x00") && e.Score <= first[0].Score {
				found = true
			}
		}
		if !found {
			t.Errorf("account %s: open reservation due at %v µs, and no entry of the index scored by then: %v", acct, first[0].Score, entries)
		}
	}
	if _, err := s.Sweep(ctx, testNow.Add(time.Hour), 1_000_000); err != nil {
		t.Fatal(err)
	}
	for _, acct := range accounts {
		if n := c.ZCard(ctx, prefix+":{"+acct+"}:open").Val(); n != 0 {
			t.Errorf("account %s: %d reservations still open after a sweep past every deadline", acct, n)
		}
	}
	if n := indexSize(t, c, s); n != 0 {
		t.Errorf("the index holds %d entries after every reservation ended, want 0", n)
	}
}

// indexSize returns the number of entries in the shards of the index of expiring
// accounts.
func indexSize(t *testing.T, c goredis.UniversalClient, s *redis.Store) int64 {
	return int64(len(indexEntries(t, c, s)))
}

// indexEntries returns the entries of every shard of the index of expiring accounts.
func indexEntries(t *testing.T, c goredis.UniversalClient, s *redis.Store) []goredis.Z {
	var all []goredis.Z
	for _, k := range s.IndexKeys() {
		e, err := c.ZRangeWithScores(t.Context(), k, 0, -1).Result()
		must(t, err)
		all = append(all, e...)
	}
	return all
}
