package accounts

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/usage"
)

// Usage statistics: a [usage.Recorder] subscribed to the service's events records
// every call of an authenticated caller that names APIs of the catalog (see
// [usage.Recorder.Observe]); the Manager reads them ([Options].Usage) for operators
// and, held to their own account (and a sub-key to its own calls), for account
// holders.

// keyCalls returns the calls per API that p's key made in period, counted as the
// ledger counts an account's: the calls that ran and kept their charge (they
// succeeded, or the API rejected their input), read from the usage statistics. It is
// nil when the service records no usage.
func (m *Manager) keyCalls(ctx context.Context, p *tollgate.Principal, period billing.Period) (map[string]int64, error) {
	if m.usageDB == nil {
		return nil, nil
	}
	res, err := m.Usage(ctx, usage.Query{Account: p.Account.ID, Key: p.Key.ID, From: period.Start, To: period.End,
		Interval: usage.Day, By: usage.ByAPI})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(res.Series))
	for _, series := range res.Series {
		for _, pt := range series.Points {
			n := pt.Calls
			for code, k := range pt.Errors {
				if code != tollgate.CodeRejected.String() {
					n -= k
				}
			}
			if n > 0 {
				out[series.Group] += n
			}
		}
	}
	return out, nil
}

// Usage answers a usage query (see [usage.Query]): the time series of calls, credits,
// errors by code and latency percentiles of one account. It applies no access rule: it
// is the operator's read; an account holder's goes through [Manager.OwnUsage], which
// holds them to their own account (and a sub-key to its own calls). It is
// CodeNotFound when the service records no usage, CodeInvalidInput for a query to fix
// (its message begins with the field: from, to, interval, by, api, key, channel or
// account), and CodeUnavailable when the store cannot answer. Calls of the last
// [usage.RecorderOptions].FlushInterval may not be in it yet.
func (m *Manager) Usage(ctx context.Context, q usage.Query) (usage.Result, error) {
	if m.usageDB == nil {
		return usage.Result{}, errNoUsage()
	}
	res, err := usage.Run(ctx, m.usageDB, q)
	if qe, ok := usage.IsQueryError(err); ok {
		return usage.Result{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf("%s: %s", qe.Param, qe.Reason), err)
	}
	if err != nil {
		return usage.Result{}, m.unavailable(ctx, "usage", err)
	}
	return res, nil
}

// KeysLastUsed returns, for each key of account that was used, the last time it was
// (admitted or refused), as far as the flushed statistics know. Its errors are those of
// [Manager.Usage].
func (m *Manager) KeysLastUsed(ctx context.Context, account string) (map[string]time.Time, error) {
	if m.usageDB == nil {
		return nil, errNoUsage()
	}
	if err := checkText("account_id", account, maxIDLength); err != nil {
		return nil, err
	}
	last, err := m.usageDB.LastUsed(ctx, account)
	if err != nil {
		return nil, m.unavailable(ctx, "usage", err)
	}
	return last, nil
}

// errNoUsage is the error of the usage reads of a manager that has no usage store.
func errNoUsage() *tollgate.Error {
	return newError(tollgate.CodeNotFound, "this service records no usage statistics (accounts.Options.Usage is not set)", nil)
}

// Status returns the principal's account position, as [tollgate.Service.Status]
// does, with the calls per API of the period counted for what the principal may see:
// the whole account's for a principal that acts for it (the primary key, a session
// acting as it, a session that names no key); for any other key (or a session it
// started) its own calls, which come from the usage statistics: nil when the service
// records none.
func (m *Manager) Status(ctx context.Context, p *tollgate.Principal) (billing.Status, error) {
	st, err := m.svc.Status(ctx, p)
	if err != nil || p.WholeAccount() {
		return st, err
	}
	st.Usage, err = m.keyCalls(ctx, p, st.Balance.Period)
	return st, err
}
