package redis_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// TestRefundPastTheLimit checks that a refund that would take the remaining credits
// past 2^63-1 is refused and changes nothing: the reservation stays open, so that it
// can still be settled, and the balance is as it was. Balances stay below
// driver.MaxCredits, so only data written before that bound can get there: the test
// writes such a balance directly.
func TestRefundPastTheLimit(t *testing.T) {
	c := client(t)
	s, prefix := newStorePrefix(t, c, &redis.Options{})
	ctx := t.Context()
	period := driver.MonthOf(time.Now())
	must(t, s.Open(ctx, driver.Opening{Account: "a", Balance: 100, Allowance: 100, Period: period}))
	req := newRequest()
	_, err := s.Admit(ctx, driver.Step{Account: "a", Request: req, Now: time.Now(),
		Credits: &driver.Reservation{Account: "a", Request: req, Amount: 60, Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)}})
	must(t, err)
	// The remaining credits rise to the largest int64.
	must(t, c.HIncrBy(ctx, prefix+":{a}:bal", "rem", math.MaxInt64-40).Err())
	before, err := s.Balance(ctx, "a", testNow, period, 100)
	must(t, err)

	settle := func(refund int64) (driver.Balance, error) {
		return s.Close(ctx, driver.Closing{Account: "a", Request: req,
			Settlement: &driver.Settlement{Account: "a", Request: req, Refund: refund, Period: period, Allowance: 100}})
	}
	if _, err := settle(10); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("refund past the limit: %v, want ErrConflict", err)
	}
	after, err := s.Balance(ctx, "a", testNow, period, 100)
	must(t, err)
	if after != before {
		t.Errorf("the refused refund changed the balance: %+v, then %+v", before, after)
	}
	// Still open: settled now without a refund.
	b, err := settle(0)
	must(t, err)
	if b.Remaining != math.MaxInt64 || b.Used != 60 {
		t.Errorf("settled: %+v", b)
	}
}
