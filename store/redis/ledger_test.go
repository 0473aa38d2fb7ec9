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

// TestReservationFromBeforeLots checks what the package documentation says of a ledger
// upgraded from a release before grant lots: a balance then held all its credits in the
// allowance part (written here directly: 1010 on an allowance of 10), and a reservation
// open at the upgrade, whose marker is that of a reservation of the allowance, gives
// back to the allowance part; at the next renewal those credits lapse with the rest, as
// they did before the upgrade.
func TestReservationFromBeforeLots(t *testing.T) {
	c := client(t)
	s, prefix := newStorePrefix(t, c, &redis.Options{CallerClock: true})
	ctx := t.Context()
	period := driver.MonthOf(testNow)
	must(t, s.Open(ctx, driver.Opening{Account: "a", Balance: 10, Allowance: 10, Period: period}))
	must(t, c.HSet(ctx, prefix+":{a}:bal", "rem", 1010).Err())
	req := newRequest()
	b, err := s.Reserve(ctx, driver.Reservation{Account: "a", Request: req, Amount: 500, Period: period, Allowance: 10,
		Now: testNow, Expires: testNow.Add(time.Hour)})
	must(t, err)
	if b.Remaining != 510 || b.Granted != 0 || b.Charge != (driver.Parts{Allowance: 500}) {
		t.Fatalf("the reservation: %+v", b)
	}
	b, err = s.Settle(ctx, driver.Settlement{Account: "a", Request: req, Refund: 500, Period: period, Allowance: 10, Now: testNow})
	must(t, err)
	if b.Remaining != 1010 || b.Granted != 0 || b.Used != 0 {
		t.Errorf("the refund: %+v, want 1010 remaining, all of it the allowance part", b)
	}
	next := driver.MonthOf(period.End)
	b, err = s.Balance(ctx, "a", next.Start, next, 10)
	must(t, err)
	if b.Remaining != 10 || b.Granted != 0 {
		t.Errorf("at the next renewal: %+v, want the allowance of 10", b)
	}
}
