package tollgate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/store"
)

// Account and key management, for operators (the admin handler) and for hosts that seed
// accounts at start-up. Key values are returned only by the calls that create them.
//
// These methods are the edge of the stores: every id, name and reason they are given is
// checked before it reaches a store (valid UTF-8, no NUL or other control characters,
// a bounded length), and a violation is a CodeInvalidInput error that names the field.
// Credits are bounded by [billing.MaxCredits].

// AccountSpec describes an account to create with [Service.CreateAccount].
type AccountSpec struct {
	// ID is the account's id; if empty, one is generated.
	ID string
	// Plan names one of the service's plans.
	Plan string
	// Credits, if set, is the starting balance; by default it is the plan's allowance.
	Credits *int64
	// Restrictions apply to every key of the account.
	Restrictions auth.Restrictions
	// KeyValue, if set, is the primary key's value (for fixtures); else it is random.
	KeyValue string
}

// CreateAccount creates an account, its primary key and its balance, and returns the
// account, the key and the key's value.
func (s *Service) CreateAccount(ctx context.Context, spec AccountSpec) (auth.Account, auth.Key, string, error) {
	plan, ok := s.plans.Lookup(spec.Plan)
	if !ok {
		return auth.Account{}, auth.Key{}, "", newError(CodeInvalidInput,
			fmt.Sprintf("plan %q does not exist; the plans are %v", spec.Plan, s.plans.Names()), nil)
	}
	credits := plan.Credits
	if spec.Credits != nil {
		switch {
		case *spec.Credits < 0:
			return auth.Account{}, auth.Key{}, "", newError(CodeInvalidInput, "credits cannot be negative", nil)
		case *spec.Credits > billing.MaxCredits:
			return auth.Account{}, auth.Key{}, "", newError(CodeInvalidInput,
				fmt.Sprintf("credits cannot pass the maximum of %d", int64(billing.MaxCredits)), nil)
		}
		credits = *spec.Credits
	}
	if spec.ID != "" {
		if err := checkText("id", spec.ID, maxIDLength); err != nil {
			return auth.Account{}, auth.Key{}, "", err
		}
	}
	now := s.now()
	acct, key, value, err := s.authority.CreateAccount(ctx, auth.NewAccount{
		ID: spec.ID, Plan: spec.Plan, Restrictions: spec.Restrictions, KeyValue: spec.KeyValue,
	}, now)
	if err != nil {
		return auth.Account{}, auth.Key{}, "", s.manageError(ctx, "account", spec.ID, err)
	}
	// The account and its key exist from here on, whatever becomes of the balance.
	s.changed(ctx, now, event.Change{Type: event.AccountCreated, Account: acct.ID, Key: key.ID, Plan: acct.Plan,
		After: restrictionsJSON(acct.Restrictions), Credits: credits})
	err = s.meter.Ledger().Open(ctx, driver.Opening{
		Account: acct.ID, Balance: credits, Allowance: plan.Credits, Period: billing.MonthOf(now),
	})
	if errors.Is(err, billing.ErrTooManyCredits) {
		return auth.Account{}, auth.Key{}, "", newError(CodeInvalidInput, fmt.Sprintf(
			"the plan %q allows %d credits a month, more than the maximum of %d", plan.Name, plan.Credits, int64(billing.MaxCredits)), err)
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return auth.Account{}, auth.Key{}, "", s.manageError(ctx, "balance of account", acct.ID, err)
	}
	return acct, key, value, nil
}

// AccountInfo is an account with its balance and the first page of its keys (never
// their values).
type AccountInfo struct {
	Account auth.Account
	Balance billing.Balance
	// Keys are the account's first [auth.DefaultKeyPage] keys, oldest first; KeysNext
	// continues the listing ([Service.AccountKeys]), empty when they are all of them.
	Keys     []auth.Key
	KeysNext string
}

// Account returns an account with its balance and the first page of its keys.
func (s *Service) Account(ctx context.Context, id string) (AccountInfo, error) {
	if err := checkText("account_id", id, maxIDLength); err != nil {
		return AccountInfo{}, err
	}
	acct, err := s.authority.Store().Account(ctx, id)
	if err != nil {
		return AccountInfo{}, s.manageError(ctx, "account", id, err)
	}
	keys, err := s.authority.Store().Keys(ctx, auth.KeyQuery{Account: id})
	if err != nil {
		return AccountInfo{}, s.manageError(ctx, "account", id, err)
	}
	plan, _ := s.plans.Lookup(acct.Plan)
	now := s.now()
	b, err := s.meter.Ledger().Balance(ctx, id, now, billing.MonthOf(now), plan.Credits)
	if err != nil {
		return AccountInfo{}, s.manageError(ctx, "balance of account", id, err)
	}
	return AccountInfo{Account: acct, Balance: b, Keys: keys.Keys, KeysNext: keys.Next}, nil
}

// CreateKey creates a sub-key of an account and returns it with its value. Its
// restrictions must be within the account's. It is not held to [Options.MaxOwnKeys].
func (s *Service) CreateKey(ctx context.Context, accountID string, spec auth.NewKey) (auth.Key, string, error) {
	return s.createKey(ctx, accountID, spec, auth.KeyLimit{})
}

// createKey is CreateKey under a limit on the account's keys; a key it refuses is an
// error wrapping [auth.ErrTooManyKeys].
func (s *Service) createKey(ctx context.Context, accountID string, spec auth.NewKey, limit auth.KeyLimit) (auth.Key, string, error) {
	if err := checkText("account_id", accountID, maxIDLength); err != nil {
		return auth.Key{}, "", err
	}
	if err := checkText("name", spec.Name, maxNameLength); err != nil {
		return auth.Key{}, "", err
	}
	now := s.now()
	key, value, err := s.authority.CreateKey(ctx, accountID, spec, limit, now)
	if errors.Is(err, auth.ErrTooManyKeys) {
		return auth.Key{}, "", err
	}
	if err != nil {
		return auth.Key{}, "", s.manageError(ctx, "account", accountID, err)
	}
	s.changed(ctx, now, event.Change{Type: event.KeyCreated, Account: key.AccountID, Key: key.ID, Name: key.Name,
		After: restrictionsJSON(key.Restrictions)})
	return key, value, nil
}

// RotateKey gives a key a new value, returned once; the old value stops working at once.
func (s *Service) RotateKey(ctx context.Context, keyID string) (auth.Key, string, error) {
	return s.rotateKey(ctx, keyID, auth.AnyRevision)
}

// rotateKey is RotateKey of a key that still has revision rev (the one a decision to
// rotate it was made on), unless rev is [auth.AnyRevision]: a key that changed since is
// CodeConflict, and is left as it is.
func (s *Service) rotateKey(ctx context.Context, keyID string, rev int64) (auth.Key, string, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, "", err
	}
	now := s.now()
	key, value, err := s.authority.RotateKey(ctx, keyID, rev, now)
	if err != nil {
		return auth.Key{}, "", s.changeError(ctx, keyID, err)
	}
	s.changed(ctx, now, event.Change{Type: event.KeyRotated, Account: key.AccountID, Key: key.ID})
	return key, value, nil
}

// RevokeKey revokes a key; the very next call with it is refused. Revoking a revoked
// key changes nothing: it returns the key as it is, and adds no audit entry. (Two
// revocations of a live key at the same moment may both be recorded: the key is read
// before it is revoked, and the stores do not say which revocation was first.)
func (s *Service) RevokeKey(ctx context.Context, keyID string) (auth.Key, error) {
	return s.revokeKey(ctx, keyID, auth.AnyRevision)
}

// revokeKey is RevokeKey of a key that still has revision rev, unless rev is
// [auth.AnyRevision]: a key that changed since (revoked or not) is CodeConflict, and is
// left as it is.
func (s *Service) revokeKey(ctx context.Context, keyID string, rev int64) (auth.Key, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, err
	}
	if k, err := s.authority.Store().Key(ctx, keyID); err == nil && k.Revoked() && (rev == auth.AnyRevision || k.Revision == rev) {
		return k, nil // a store error, or a changed key, is the revocation's to report
	}
	now := s.now()
	key, err := s.authority.RevokeKey(ctx, keyID, rev, now)
	if err != nil {
		return auth.Key{}, s.changeError(ctx, keyID, err)
	}
	s.changed(ctx, now, event.Change{Type: event.KeyRevoked, Account: key.AccountID, Key: key.ID})
	return key, nil
}

// KeyChange is a change of a key's name or restrictions, for [Service.UpdateKey]: nil
// fields are left as they are.
type KeyChange = auth.KeyChange

// UpdateKey changes the name or the restrictions of a key (within its account's) and
// returns the key as changed. The very next call with the key is held to the new
// restrictions, on every instance, key cache or not. A revoked key is CodeConflict.
func (s *Service) UpdateKey(ctx context.Context, keyID string, c KeyChange) (auth.Key, error) {
	return s.updateKey(ctx, keyID, c, nil)
}

// updateKey is UpdateKey with a policy check (see [auth.Authority.UpdateKey]).
func (s *Service) updateKey(ctx context.Context, keyID string, c KeyChange, check func(old, updated auth.Key) error) (auth.Key, error) {
	if err := checkText("key_id", keyID, maxIDLength); err != nil {
		return auth.Key{}, err
	}
	if c.Name != nil {
		if err := checkText("name", *c.Name, maxNameLength); err != nil {
			return auth.Key{}, err
		}
	}
	now := s.now()
	before, after, err := s.authority.UpdateKey(ctx, keyID, c, now, check)
	if e := (*Error)(nil); errors.As(err, &e) {
		return auth.Key{}, e
	}
	switch {
	case errors.Is(err, auth.ErrUpdateConflict):
		return auth.Key{}, newError(CodeConflict, "the key changed while it was being updated; read it again and retry", err)
	case errors.Is(err, store.ErrConflict):
		// The key is revoked (by the time the update was tried, if not when read).
		return auth.Key{}, newError(CodeConflict, fmt.Sprintf("key %q is revoked; a revoked key cannot be changed", keyID), err)
	case err != nil:
		return auth.Key{}, s.manageError(ctx, "key", keyID, err)
	}
	s.changed(ctx, now, event.Change{Type: event.KeyUpdated, Account: after.AccountID, Key: after.ID,
		Before: restrictionsJSON(before.Restrictions), After: restrictionsJSON(after.Restrictions),
		OldName: before.Name, Name: after.Name})
	return after, nil
}

// AdjustCredits adds amount credits to an account's balance (a negative amount takes
// them away, never below zero; a grant never takes the remaining plus used credits past
// [billing.MaxCredits]). The reason is required. A non-empty idempotencyKey makes a
// retried adjustment apply once (the audit log records each attempt that succeeds,
// retries included: the ledger does not tell them apart).
func (s *Service) AdjustCredits(ctx context.Context, accountID string, amount int64, reason, idempotencyKey string) (billing.Balance, error) {
	if err := checkText("account_id", accountID, maxIDLength); err != nil {
		return billing.Balance{}, err
	}
	if err := checkText("reason", reason, maxReasonLength); err != nil {
		return billing.Balance{}, err
	}
	if strings.TrimSpace(reason) == "" {
		return billing.Balance{}, newError(CodeInvalidInput, "reason is required: say why the balance changes", nil)
	}
	if amount < -billing.MaxCredits || amount > billing.MaxCredits {
		return billing.Balance{}, newError(CodeInvalidInput, fmt.Sprintf(
			"amount must be between -%d and %d", int64(billing.MaxCredits), int64(billing.MaxCredits)), nil)
	}
	acct, err := s.authority.Store().Account(ctx, accountID)
	if err != nil {
		return billing.Balance{}, s.manageError(ctx, "account", accountID, err)
	}
	plan, _ := s.plans.Lookup(acct.Plan)
	id := s.ids.next()
	if idempotencyKey != "" {
		sum := sha256.Sum256([]byte("adjust\x00" + accountID + "\x00" + idempotencyKey))
		copy(id[:], sum[:])
	}
	now := s.now()
	adj := driver.Adjustment{Account: accountID, Request: id, Amount: amount, Reason: reason,
		Period: billing.MonthOf(now), Allowance: plan.Credits, Now: now}
	b, err := s.meter.Ledger().Adjust(ctx, adj)
	if errors.Is(err, store.ErrNotFound) && amount >= 0 {
		// The account has no balance (its creation was interrupted): open it.
		if err = s.meter.Ledger().Open(ctx, driver.Opening{Account: accountID, Allowance: plan.Credits, Period: adj.Period}); err == nil || errors.Is(err, store.ErrConflict) {
			b, err = s.meter.Ledger().Adjust(ctx, adj)
		}
	}
	if errors.Is(err, billing.ErrInsufficientCredits) {
		return b, newError(CodeConflict, fmt.Sprintf("the balance is %d; it cannot go below zero", b.Remaining), err)
	}
	if errors.Is(err, billing.ErrTooManyCredits) {
		return b, newError(CodeInvalidInput, fmt.Sprintf(
			"the balance is %d with %d used this period; together they cannot pass the maximum of %d credits",
			b.Remaining, b.Used, int64(billing.MaxCredits)), err)
	}
	if err != nil {
		return b, s.manageError(ctx, "balance of account", accountID, err)
	}
	c := event.Change{Type: event.CreditsAdjusted, Account: accountID, Credits: amount, Reason: reason}
	if idempotencyKey != "" {
		// A replay changes nothing: its event has the first one's ID, which the audit
		// log stores once.
		c.ID = "credits-" + hex.EncodeToString(id[:])
	}
	s.changed(ctx, now, c)
	return b, nil
}

// manageError maps the errors of account and key management to codes.
func (s *Service) manageError(ctx context.Context, what, id string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return newError(CodeNotFound, fmt.Sprintf("no %s has the id %q", what, id), err)
	case errors.Is(err, store.ErrConflict):
		// The store's words name the store: they stay in Err, for the logs.
		return newError(CodeConflict, fmt.Sprintf("the %s %q conflicts with an existing record: read it again, or choose another id", what, id), err)
	case errors.Is(err, auth.ErrInvalid), errors.Is(err, auth.ErrWidens):
		return newError(CodeInvalidInput, err.Error(), err)
	}
	return s.unavailable(ctx, what, err)
}

// changeError is manageError for a rotation or revocation of a key, which may have been
// conditioned on the key's revision.
func (s *Service) changeError(ctx context.Context, keyID string, err error) error {
	if errors.Is(err, auth.ErrChangeConflict) {
		return newError(CodeConflict, "the key changed while you were changing it; read it again and retry", err)
	}
	return s.manageError(ctx, "key", keyID, err)
}

// The longest texts that management accepts, in characters.
const (
	maxIDLength     = 64
	maxNameLength   = 64
	maxReasonLength = 500
)

// checkText returns a CodeInvalidInput error naming field unless value is at most max
// characters of printable text ([cleantext.Printable]): valid UTF-8 without NUL or
// other control characters, invisible formatting characters (bidirectional controls,
// zero-width characters) or stacks of combining marks, which would let a key's name
// or a reason display as other text.
func checkText(field, value string, max int) error {
	switch {
	case !utf8.ValidString(value):
		return newError(CodeInvalidInput, field+": not valid UTF-8 text", nil)
	case utf8.RuneCountInString(value) > max:
		return newError(CodeInvalidInput, fmt.Sprintf("%s: longer than %d characters", field, max), nil)
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return newError(CodeInvalidInput, field+": contains a control character (a NUL byte, a line break, ...); use printable text", nil)
	case !cleantext.Printable(value):
		return newError(CodeInvalidInput, fmt.Sprintf(
			"%s: contains an invisible formatting character (a bidirectional control, a zero-width character) or more than %d combining marks on a letter, which could make it display as other text; use printable text",
			field, cleantext.MaxMarks), nil)
	}
	return nil
}
