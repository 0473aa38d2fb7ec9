package accounts

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/usage"
)

// UsageTotals answers a query of usage across accounts (see [usage.TotalsQuery]): the
// calls, credits and errors of a range, summed per account, API, channel or outcome,
// ranked by calls or by credits, a page at a time. It is the operator's read: it applies
// no access rule, and no front door of account holders calls it.
//
// Besides the checks of the query, the account filter must be an account id (text of
// at most 64 characters), the channel one that calls arrive by (rest, graphql, mcp,
// batch, or other for calls made without a channel), and the outcome ok or the name of
// an error code (rejected, api_failed, rate_limited, ...).
//
// It is CodeNotFound when the service records no usage, CodeInvalidInput for a query to
// fix (its message begins with the field: from, to, group_by, order, account, api,
// channel, outcome, limit or cursor), and CodeUnavailable when the store cannot answer.
// Calls of the last [usage.RecorderOptions].FlushInterval may not be in it yet.
func (m *Manager) UsageTotals(ctx context.Context, q usage.TotalsQuery) (usage.TotalsPage, error) {
	if m.usageDB == nil {
		return usage.TotalsPage{}, errNoUsage()
	}
	if err := checkText("account", q.Account, maxIDLength); err != nil {
		return usage.TotalsPage{}, err
	}
	if q.Channel != "" && !slices.Contains(usageChannels(), q.Channel) {
		return usage.TotalsPage{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf("channel: unknown channel %.40q: use %s",
			q.Channel, strings.Join(usageChannels(), ", ")), nil)
	}
	if q.Outcome != "" && !slices.Contains(usageOutcomes(), q.Outcome) {
		return usage.TotalsPage{}, newError(tollgate.CodeInvalidInput, fmt.Sprintf("outcome: unknown outcome %.40q: use ok or an error code (%s)",
			q.Outcome, strings.Join(usageOutcomes()[1:], ", ")), nil)
	}
	page, err := m.usageDB.Totals(ctx, q)
	if qe, ok := usage.IsQueryError(err); ok {
		return usage.TotalsPage{}, newError(tollgate.CodeInvalidInput, qe.Param+": "+qe.Reason, err)
	}
	if err != nil {
		return usage.TotalsPage{}, m.unavailable(ctx, "usage", err)
	}
	return page, nil
}

// usageChannels returns the channels that usage records name: those of auth, and
// "other" for a call made without one.
func usageChannels() []string { return append(auth.ChannelNames(), "other") }

// usageOutcomes returns the outcomes that usage records name: usage.OK first, then the
// name of every error code.
func usageOutcomes() []string {
	out := []string{usage.OK}
	for _, c := range tollgate.Codes() {
		out = append(out, c.String())
	}
	return out
}
