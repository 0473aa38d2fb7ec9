package accounts_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// lossyLedger applies its first lost adjustments but answers them with an error, as a
// ledger whose answer is lost in the network; with fail set, it refuses every
// adjustment without applying it.
type lossyLedger struct {
	driver.Ledger
	lost    atomic.Int32 // adjustments still to lose
	fail    atomic.Bool
	adjusts atomic.Int32
}

var errLost = errors.New("connection reset by peer")

func (l *lossyLedger) Adjust(ctx context.Context, a driver.Adjustment) (driver.Balance, error) {
	l.adjusts.Add(1)
	if l.fail.Load() {
		return driver.Balance{}, errLost
	}
	b, err := l.Ledger.Adjust(ctx, a)
	if err == nil && l.lost.Add(-1) >= 0 {
		return driver.Balance{}, errLost
	}
	return b, err
}

// planChanges records the changes of plan published.
type planChanges struct{ n atomic.Int32 }

func (p *planChanges) Observe(_ context.Context, e event.Event) {
	if c, ok := e.(*event.Change); ok && c.Type == event.PlanChanged {
		p.n.Add(1)
	}
}

// plansManager returns a manager on the key store and ledger, with a basic and a pro
// plan, the changes of plan it publishes, and an account "acct" on basic.
func plansManager(t *testing.T, keys auth.KeyStore, ledger driver.Ledger) (*accounts.Manager, *planChanges) {
	t.Helper()
	return plansManagerOn(t, keys, ledger, testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)))
}

// plansManagerOn is plansManager on the clock, with the extra plans besides basic and
// pro.
func plansManagerOn(t *testing.T, keys auth.KeyStore, ledger driver.Ledger, clock *testenv.Clock, extra ...billing.Plan) (*accounts.Manager, *planChanges) {
	t.Helper()
	plans, err := billing.NewPlans(append([]billing.Plan{{Name: "basic", Credits: 100}, {Name: "pro", Credits: 1000}}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	svc, err := tollgate.New(&catalog.Registry{}, tollgate.Stores{Keys: keys, Ledger: ledger,
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}, plans, &tollgate.Options{Now: clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	changes := &planChanges{}
	svc.Events().Subscribe(changes, event.PlanChanged)
	mgr, err := accounts.New(svc, &accounts.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	if _, _, _, err := mgr.CreateAccount(t.Context(), accounts.Spec{ID: "acct", Plan: "basic"}); err != nil {
		t.Fatal(err)
	}
	return mgr, changes
}

// TestChangePlanRetriesChangedAccount: a change decided on a record that changed
// since is decided again on the new record, and applied once; one that keeps losing
// is a conflict.
func TestChangePlanRetriesChangedAccount(t *testing.T) {
	keys := &racingKeys{KeyStore: memory.NewKeyStore()}
	mgr, changes := plansManager(t, keys, memory.NewLedger(nil))
	keys.races.Store(1)
	c, err := mgr.ChangePlan(t.Context(), "acct", "pro", "")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Changed || c.Account.Plan != "pro" || c.Account.Revision != 2 || c.Balance.Remaining != 1000 {
		t.Errorf("change %+v: want pro at revision 2 (after the racing update) with 1000 credits", c)
	}
	if n := changes.n.Load(); n != 1 {
		t.Errorf("%d changes of plan published, want 1", n)
	}
	// A change that keeps losing is a conflict, and changes nothing.
	keys.races.Store(-1)
	if _, err := mgr.ChangePlan(t.Context(), "acct", "basic", accounts.EffectiveNow); tollgate.CodeOf(err) != tollgate.CodeConflict {
		t.Errorf("a change that keeps losing: %v, want a conflict", err)
	}
	keys.races.Store(0)
	if info, err := mgr.Account(t.Context(), "acct"); err != nil || info.Account.Plan != "pro" || info.Balance.Remaining != 1000 || changes.n.Load() != 1 {
		t.Errorf("after the lost change: %+v, %+v, %v, %d changes; want pro, 1000 credits, one change", info.Account, info.Balance, err, changes.n.Load())
	}
}

// TestChangePlanAdjustsOnce: a change now whose adjustment's answer is lost applies
// the difference once, its retry recognised; one the ledger cannot take leaves the plan
// changed and says the allowance did not.
func TestChangePlanAdjustsOnce(t *testing.T) {
	ledger := &lossyLedger{Ledger: memory.NewLedger(nil)}
	mgr, changes := plansManager(t, memory.NewKeyStore(), ledger)
	ledger.lost.Store(2)
	c, err := mgr.ChangePlan(t.Context(), "acct", "pro", accounts.EffectiveNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.Balance.Remaining != 1000 || ledger.adjusts.Load() != 3 {
		t.Errorf("balance %+v after %d adjustments, want 1000: 100 and the difference once, in the third attempt", c.Balance, ledger.adjusts.Load())
	}

	ledger.fail.Store(true)
	_, err = mgr.ChangePlan(t.Context(), "acct", "basic", accounts.EffectiveNow)
	if tollgate.CodeOf(err) != tollgate.CodeUnavailable || !strings.Contains(err.Error(), "the plan of account \"acct\" changed to basic, but the allowance of its current period could not be changed from 1000 to 100 credits") ||
		!strings.Contains(err.Error(), "grant or take the difference, -900 credits, with a credit adjustment") {
		t.Errorf("a change whose adjustment fails: %v", err)
	}
	info, err := mgr.Account(t.Context(), "acct")
	if err != nil || info.Account.Plan != "basic" || info.Balance.Remaining != 1000 {
		t.Errorf("account after the failed adjustment: %+v, %v; want basic, its balance unchanged", info.Account, err)
	}
	if n := changes.n.Load(); n != 2 {
		t.Errorf("%d changes of plan published, want 2", n)
	}
}
