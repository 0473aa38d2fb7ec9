package accounts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/store"
)

// Creating what already exists is idempotent, so that a host can seed its accounts and
// keys at every start: the same definition returns what is stored; another one is a
// conflict that says what differs.

// existingAccount answers the creation of an account whose id, or primary key value, is
// taken. With the same definition (its plan, its restrictions and, when spec names
// them, its primary key's value and its billing anchor) it returns the account as it
// is, with its primary key and the value spec gave (none when spec gave none: values
// are never stored), and opens its balance if a creation was cut short before it did.
// The opening credits are not compared: the balance has moved since.
func (m *Manager) existingAccount(ctx context.Context, spec Spec, credits int64, now time.Time) (auth.Account, auth.Key, string, error) {
	acct, err := m.keys.Account(ctx, spec.ID)
	if errors.Is(err, store.ErrNotFound) {
		// No account has the id: what conflicts is the primary key's value.
		return auth.Account{}, auth.Key{}, "", newError(tollgate.CodeConflict, "the primary key's value is taken: give another value, or none", nil)
	}
	if err != nil {
		return auth.Account{}, auth.Key{}, "", m.manageError(ctx, "account", spec.ID, err)
	}
	primary, err := m.primaryKey(ctx, acct.ID)
	if err != nil {
		return auth.Account{}, auth.Key{}, "", m.manageError(ctx, "primary key of account", spec.ID, err)
	}
	var differs []string
	if inForce := acct.PlanAt(now); inForce != spec.Plan {
		// The plan in force: a change the operator scheduled counts from its renewal.
		differs = append(differs, fmt.Sprintf("its plan is %q, not %q", inForce, spec.Plan))
	}
	if !sameRestrictions(acct.Restrictions, spec.Restrictions) {
		differs = append(differs, "its restrictions differ")
	}
	if spec.BillingAnchor != nil {
		if anchor, _ := billingAnchor(spec.BillingAnchor, now); !anchor.Equal(acct.BillingAnchor) {
			differs = append(differs, fmt.Sprintf("its billing anchor is %s, not %s",
				acct.BillingAnchor.UTC().Format(time.RFC3339), anchor.Format(time.RFC3339)))
		}
	}
	value := ""
	if spec.KeyValue != "" {
		v, err := keyValue(spec.KeyValue)
		if err != nil {
			return auth.Account{}, auth.Key{}, "", err
		}
		if primary.Hash != auth.HashKey(v) {
			differs = append(differs, "its primary key has another value")
		}
		value = v
	}
	if len(differs) > 0 {
		return auth.Account{}, auth.Key{}, "", newError(tollgate.CodeConflict, fmt.Sprintf(
			"account %q exists with another definition (%s): choose another id, or change the account", spec.ID, strings.Join(differs, "; ")), nil)
	}
	if err := m.openBalance(ctx, &acct, credits, now); err != nil {
		return auth.Account{}, auth.Key{}, "", err
	}
	return acct, primary, value, nil
}

// primaryKey returns the primary key of an account.
func (m *Manager) primaryKey(ctx context.Context, accountID string) (auth.Key, error) {
	q := auth.KeyQuery{Account: accountID, Limit: auth.MaxKeyPage}
	for {
		page, err := m.keys.Keys(ctx, q)
		if err != nil {
			return auth.Key{}, err
		}
		if i := slices.IndexFunc(page.Keys, func(k auth.Key) bool { return k.Primary }); i >= 0 {
			return page.Keys[i], nil
		}
		if page.Next == "" {
			return auth.Key{}, fmt.Errorf("account %q has no primary key", accountID)
		}
		q.After = page.Next
	}
}

// existingKey answers the creation of a key whose value (spec.Value) a key already
// has. A key of the same account with the same name and restrictions is returned as it
// is, with the value (revoked, if it was revoked since); anything else is a conflict,
// which does not say whose key holds the value when it is another account's.
func (m *Manager) existingKey(ctx context.Context, accountID string, spec NewKey) (auth.Key, string, error) {
	value, err := keyValue(spec.Value)
	if err != nil {
		return auth.Key{}, "", err
	}
	if spec.Name, err = keyName(spec.Name); err != nil {
		return auth.Key{}, "", err
	}
	key, _, err := m.keys.Resolve(ctx, auth.HashKey(value))
	if errors.Is(err, store.ErrNotFound) {
		return auth.Key{}, "", newError(tollgate.CodeConflict, "the key's value is taken: give another value, or none", nil)
	}
	if err != nil {
		return auth.Key{}, "", m.manageError(ctx, "account", accountID, err)
	}
	switch {
	case key.AccountID != accountID:
		return auth.Key{}, "", newError(tollgate.CodeConflict, "the key's value is taken: give another value, or none", nil)
	case key.Name != spec.Name || key.Primary || !sameRestrictions(key.Restrictions, spec.Restrictions):
		return auth.Key{}, "", newError(tollgate.CodeConflict, fmt.Sprintf(
			"the key with this value (%s) exists with another name or other restrictions: give another value, or change the key", key.ID), nil)
	}
	return key, value, nil
}

// sameRestrictions reports whether a and b restrict the same.
func sameRestrictions(a, b auth.Restrictions) bool {
	x, y := a.Spec(), b.Spec()
	if (x.ExpiresAt == nil) != (y.ExpiresAt == nil) || x.ExpiresAt != nil && !x.ExpiresAt.Equal(*y.ExpiresAt) {
		return false
	}
	return slices.Equal(x.APIs, y.APIs) && slices.Equal(x.Channels, y.Channels) && slices.Equal(x.AllowedIPs, y.AllowedIPs)
}

// checkIDUnused refuses the id of an account that was deleted: deletion removes the
// account and its keys, while its balance, usage and audit log keep their own
// retention, and a new account with the id would inherit them. An account that exists
// passes (CreateAccount compares it with the spec), and so does a store that cannot
// answer (the creation reports the outage).
func (m *Manager) checkIDUnused(ctx context.Context, id string) error {
	if _, err := m.keys.Account(ctx, id); !errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if _, err := m.ledger.Usage(ctx, id, billing.Period{}); err != nil {
		return nil
	}
	return newError(tollgate.CodeConflict, fmt.Sprintf(
		"the id %q belonged to an account that was deleted; choose another id", id), nil)
}
