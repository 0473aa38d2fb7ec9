package redis_test

import (
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// rollOf returns a roll of reservation id of acct giving back refund, counting one
// call of "hash", with a next reservation next of amount credits held from now to
// expires.
func rollOf(acct string, id, next driver.RequestID, refund, amount int64, p driver.Period, now, expires time.Time) driver.Roll {
	return driver.Roll{
		Settlement: driver.Settlement{Account: acct, Request: id, Refund: refund, Period: p, Allowance: 100, Now: now},
		Counts:     map[string]int64{"hash": 1},
		Next:       &driver.Reservation{Account: acct, Request: next, Amount: amount, Period: p, Allowance: 100, Now: now, Expires: expires},
	}
}

// withBlock returns a Store on c under a fresh prefix with opts, where account "acct"
// has a balance of 100 in period p and a block of 30 reserved at now, held for an
// hour.
func withBlock(t *testing.T, c goredis.UniversalClient, opts *redis.Options, p driver.Period, now time.Time) (*redis.Store, string, driver.RequestID) {
	t.Helper()
	s, prefix := newStorePrefix(t, c, opts)
	must(t, s.Open(t.Context(), driver.Opening{Account: "acct", Balance: 100, Allowance: 100, Period: p}))
	b := newRequest()
	_, err := s.Reserve(t.Context(), driver.Reservation{Account: "acct", Request: b, Amount: 30, Period: p, Allowance: 100, Now: now, Expires: now.Add(time.Hour)})
	must(t, err)
	return s, prefix, b
}

// TestRollIndexesNext checks that a roll whose next reservation is due before every
// entry of the index of expiring accounts has the account indexed first (the script
// refuses it, changing nothing, and the Store sends it again with its claim), so that a
// sweep finds the next reservation and gives its credits back.
func TestRollIndexesNext(t *testing.T) {
	rec := &recorder{}
	c := newClient(addr(t), nil)
	t.Cleanup(func() { c.Close() })
	c.AddHook(rec)
	ctx, p := t.Context(), driver.MonthOf(testNow)
	s, prefix, b1 := withBlock(t, c, nil, p, testNow)
	b2 := newRequest()
	must(t, c.ScriptLoad(ctx, redis.LuaSource("roll.lua")).Err()) // each run one EVALSHA
	rec.take()
	due := testNow.Add(time.Minute)
	got, err := s.Roll(ctx, rollOf("acct", b1, b2, 20, 20, p, testNow, due))
	must(t, err)
	runs := 0
	for _, args := range rec.take() {
		if name, _ := keysOf(args); name == "evalsha" && args[1] == redis.Scripts["roll"].Hash() {
			runs++
		}
	}
	if runs != 2 {
		t.Errorf("the roll's script ran %d times, want 2: refused until the account is indexed, then made", runs)
	}
	if got.Next != 20 || got.Replay || got.Balance.Remaining != 70 || got.Balance.Used != 30 {
		t.Fatalf("Roll: %+v, want Next 20 with 70 remaining and 30 used", got)
	}
	found := false
	for _, e := range indexEntries(t, c, s) {
		if strings.HasPrefix(e.Member.(string), "acct\x00") && e.Score <= float64(due.UnixMicro()) {
			found = true
		}
	}
	if !found {
		t.Errorf("no entry of the index scored by the next reservation's deadline")
	}
	if n, err := s.Sweep(ctx, due.Add(time.Minute), 10); err != nil || n != 1 {
		t.Errorf("Sweep after the next reservation's deadline voided %d (%v), want 1", n, err)
	}
	b, err := s.Balance(ctx, "acct", due.Add(time.Minute), p, 100)
	must(t, err)
	if b.Remaining != 90 || b.Used != 10 {
		t.Errorf("balance after the sweep: %d remaining, %d used; want 90 and 10 (the charge kept)", b.Remaining, b.Used)
	}
	if n := c.ZCard(ctx, prefix+":{acct}:open").Val(); n != 0 {
		t.Errorf("%d reservations open after the sweep, want 0", n)
	}
}

// TestRollServerClock checks a roll on the Redis server's clock (the default): the
// caller's instants are ignored, and the next reservation is held for its
// Expires-Now from the server's TIME.
func TestRollServerClock(t *testing.T) {
	c, ctx, p := client(t), t.Context(), driver.MonthOf(time.Now())
	s, prefix, b1 := withBlock(t, c, &redis.Options{}, p, past)
	b2 := newRequest()
	// Instants a century ahead: on the caller's clock b1 would be voided.
	got, err := s.Roll(ctx, rollOf("acct", b1, b2, 25, 25, p, future, future.Add(time.Hour)))
	must(t, err)
	if got.Next != 25 || got.Balance.Remaining != 70 || got.Balance.Used != 30 || got.Balance.Charge != (driver.Parts{Allowance: 5}) {
		t.Fatalf("Roll: %+v, want Next 25, 70 remaining, 30 used and a charge of 5", got)
	}
	score, err := c.ZScore(ctx, prefix+":{acct}:open", b2.String()).Result()
	must(t, err)
	if d := time.UnixMicro(int64(score)); d.Before(time.Now().Add(30*time.Minute)) || d.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("the next reservation is due at %s, want about an hour after the server's now", d)
	}
	// A replay on the server's clock too, then the next settled.
	again, err := s.Roll(ctx, rollOf("acct", b1, b2, 25, 25, p, past, past.Add(time.Hour)))
	must(t, err)
	if !again.Replay || again.Next != 25 {
		t.Errorf("replayed Roll: %+v, want a replay with Next 25", again)
	}
	b, err := s.Settle(ctx, driver.Settlement{Account: "acct", Request: b2, Refund: 25, Period: p, Allowance: 100})
	must(t, err)
	if b.Remaining != 95 || b.Used != 5 {
		t.Errorf("Settle of the next: %d remaining, %d used; want 95 and 5", b.Remaining, b.Used)
	}
	u, err := s.Usage(ctx, "acct", p)
	must(t, err)
	if u["hash"] != 1 {
		t.Errorf("usage %v, want one call of hash", u)
	}
}
