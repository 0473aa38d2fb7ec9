package redis_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// TestReplayWhereANewStepIsRefused checks that a step replayed after it was admitted is
// admitted again, taking nothing, even where a new step would now be refused: by its
// key, its rate limit, its slot or its credits. The admission script decides a step
// as a new one first and finds the replay only then (its marker), so each refusal is
// a path of its own.
func TestReplayWhereANewStepIsRefused(t *testing.T) {
	period := driver.MonthOf(testNow)
	for _, tt := range []struct {
		name string
		// refuse makes a new step of the account refused by one part, after the
		// first step (first) was admitted; it returns the replay of first to send.
		refuse func(t *testing.T, s *redis.Store, first driver.Step) driver.Step
		want   driver.Denial // what a new step is refused by
	}{
		{"key", func(t *testing.T, s *redis.Store, first driver.Step) driver.Step {
			first.Key = &driver.KeyCheck{Account: first.Account, KeyID: first.Key.KeyID, Hash: newHash()}
			return first
		}, driver.DeniedKey},
		{"rate", func(t *testing.T, s *redis.Store, first driver.Step) driver.Step {
			first.Rate = &driver.Limit{Rate: 1, Per: time.Hour, Burst: 1}
			return first
		}, driver.DeniedRate},
		{"slot", func(t *testing.T, s *redis.Store, first driver.Step) driver.Step {
			// The first step's lease ends; another request takes the one slot.
			if _, err := s.Close(t.Context(), driver.Closing{Account: first.Account, Request: first.Request, ReleaseSlot: true}); err != nil {
				t.Fatal(err)
			}
			other := first
			rand.Read(other.Request[:])
			other.Credits = nil
			if r, err := s.Admit(t.Context(), other); err != nil || r.Denied != driver.NotDenied {
				t.Fatalf("Admit of another request: %+v, %v", r, err)
			}
			first.Slot = &driver.SlotClaim{Ceiling: 1, Lease: time.Minute}
			return first
		}, driver.DeniedSlot},
		{"credits", func(t *testing.T, s *redis.Store, first driver.Step) driver.Step {
			c := *first.Credits
			c.Amount = 1000
			first.Credits = &c
			return first
		}, driver.DeniedCredits},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, &redis.Options{CallerClock: true})
			ctx := t.Context()
			key := auth.Key{ID: "key-1", AccountID: "acct", Name: "primary", Primary: true, Hash: newHash()}
			must(t, s.CreateAccount(ctx, auth.Account{ID: "acct", Plan: "pro"}, key))
			must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 100, Allowance: 100, Period: period}))
			first := driver.Step{Account: "acct", Now: testNow,
				Key:  &driver.KeyCheck{Account: "acct", KeyID: key.ID, Hash: key.Hash},
				Rate: &driver.Limit{Rate: 1, Per: time.Hour, Burst: 10},
				Slot: &driver.SlotClaim{Ceiling: 2, Lease: time.Minute},
				Credits: &driver.Reservation{Account: "acct", APIs: []string{"hash"}, Amount: 10, Period: period,
					Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)}}
			rand.Read(first.Request[:])
			first.Credits.Request = first.Request
			if r, err := s.Admit(ctx, first); err != nil || r.Denied != driver.NotDenied {
				t.Fatalf("Admit: %+v, %v", r, err)
			}
			replay := tt.refuse(t, s, first)

			// A new step like the replay is refused...
			fresh := replay
			rand.Read(fresh.Request[:])
			if fresh.Credits != nil {
				c := *fresh.Credits
				c.Request = fresh.Request
				fresh.Credits = &c
			}
			before := state(t, s, period)
			if r, err := s.Admit(ctx, fresh); err != nil || r.Denied != tt.want {
				t.Fatalf("Admit of a new step: %+v, %v; want refused by %v", r, err, tt.want)
			}
			// ...and the replay is admitted again, taking nothing.
			r, err := s.Admit(ctx, replay)
			if err != nil || r.Denied != driver.NotDenied {
				t.Fatalf("replay: %+v, %v; want admitted", r, err)
			}
			if after := state(t, s, period); after != before {
				t.Errorf("after the replay: %+v, want %+v", after, before)
			}
		})
	}
}

// replayState is what a step can take: credits, usage counts, slots and rate events.
type replayState struct {
	remaining, used, hash int64
	inUse                 int
	rate                  driver.RateDecision
}

func state(t *testing.T, s *redis.Store, period driver.Period) replayState {
	t.Helper()
	ctx := t.Context()
	b, err := s.Balance(ctx, "acct", testNow, period, 100)
	must(t, err)
	u, err := s.Usage(ctx, "acct", period)
	must(t, err)
	n, err := s.InUse(ctx, "acct", testNow)
	must(t, err)
	d, err := s.Peek(ctx, "acct", driver.Limit{Rate: 1, Per: time.Hour, Burst: 10}, testNow)
	must(t, err)
	return replayState{remaining: b.Remaining, used: b.Used, hash: u["hash"], inUse: n, rate: d}
}
