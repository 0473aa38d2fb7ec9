package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
)

// AdmitBatch performs steps of one account in one call of tollgate_admit_batch, as a
// batch of Options.Batch sends them, so that the tests can choose what a batch holds.
// It returns each step's result and error, as Admit would report them.
func (s *Store) AdmitBatch(ctx context.Context, account string, steps []driver.Step) ([]driver.StepResult, []error, error) {
	ps := make([]*admitParams, len(steps))
	for i := range steps {
		p, err := newAdmitParams(&steps[i])
		if err != nil {
			return nil, nil, err
		}
		ps[i] = p
	}
	rows, err := s.admitBatch(ctx, account, ps)
	if err != nil {
		return nil, nil, err
	}
	res, errs := make([]driver.StepResult, len(steps)), make([]error, len(steps))
	for i := range rows {
		res[i], errs[i] = rows[i].result(&steps[i])
	}
	return res, errs, nil
}

// CloseBatch performs closings of one account in one call of tollgate_close_batch, and
// returns each one's balance and error, as Close would report them.
func (s *Store) CloseBatch(ctx context.Context, account string, cs []driver.Closing) ([]driver.Balance, []error, error) {
	ps := make([]*closeParams, len(cs))
	for i := range cs {
		ps[i] = newCloseParams(&cs[i])
	}
	rows, err := s.closeBatch(ctx, account, ps)
	if err != nil {
		return nil, nil, err
	}
	bs, errs := make([]driver.Balance, len(cs)), make([]error, len(cs))
	for i, r := range rows {
		c := cs[i]
		if c.Settlement != nil {
			bs[i] = r.balance()
			errs[i] = settleErr(r.status, c.Settlement.Account, c.Request, c.Settlement.Refund, r.reserved)
		}
	}
	return bs, errs, nil
}

// SetAccountScan sets the most accounts a page of Accounts examines, so that the tests
// make the store return short pages.
func (s *Store) SetAccountScan(n int) { s.scan = n }

// Operation is operation, for its tests.
var Operation = operation

// CancelWait is how long a cancel request waits for the server to close its
// connection.
const CancelWait = cancelWait

// MigrateWithSlowStep is Migrate with one more migration after the package's, numbered
// SchemaVersion+1, that takes d (pg_sleep): a migration slower than a statement
// timeout.
func MigrateWithSlowStep(ctx context.Context, db DB, d time.Duration) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	slow := migration{version: SchemaVersion + 1, name: "slow_step", sql: fmt.Sprintf("SELECT pg_sleep(%g)", d.Seconds())}
	return migrate(ctx, db, append(ms, slow))
}
