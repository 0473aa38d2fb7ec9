package accounts_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// changeLog records the changes a service publishes, as "kind account key reason".
type changeLog struct {
	mu   sync.Mutex
	list []string
}

func (l *changeLog) Observe(_ context.Context, e event.Event) {
	if c, ok := e.(*event.Change); ok {
		l.mu.Lock()
		l.list = append(l.list, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", c.Type, c.Account, c.Key, c.Reason)))
		l.mu.Unlock()
	}
}

// take returns the changes recorded since the last take.
func (l *changeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.list
	l.list = nil
	return out
}

var lifecycleT0 = time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)

// lifecycle is a harness with a clock, an audit log and a record of the changes
// published, the account's primary key and a sub-key.
type lifecycle struct {
	*harness
	clock   *testenv.Clock
	changes *changeLog
	primary auth.Key
	sub     auth.Key
	subKey  string
}

func newLifecycle(t *testing.T, opts accounts.Options) *lifecycle {
	t.Helper()
	clock := testenv.NewClock(lifecycleT0)
	h := newHarness(t, harnessOptions{opts: tollgate.Options{Now: clock.Now}, accounts: opts, audit: memory.NewAuditStore()})
	l := &lifecycle{harness: h, clock: clock, changes: &changeLog{}}
	h.svc.Events().Subscribe(l.changes, event.Kinds()...)
	info, err := h.mgr.Account(t.Context(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	l.primary = info.Keys[0]
	if l.sub, l.subKey, err = h.mgr.CreateKey(t.Context(), "acct", accounts.NewKey{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	l.changes.take()
	return l
}

func (l *lifecycle) callWith(value string) error {
	return l.svc.Call(context.Background(), tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value},
		Channel: auth.ChannelREST}, "ok", nil).Err
}

func wantCodeSays(t *testing.T, what string, err error, code tollgate.Code, parts ...string) {
	t.Helper()
	if tollgate.CodeOf(err) != code {
		t.Errorf("%s: %v (%s), want %s", what, err, tollgate.CodeOf(err), code)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q does not say %q", what, err, p)
		}
	}
}

// TestLifecycle walks an account through its states: each change is stored with its
// moment, published once with its reason and recorded in the audit log; a change to
// the state it is in changes nothing and publishes nothing; closure revokes every key
// and is final.
func TestLifecycle(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	ctx := accounts.WithActor(t.Context(), event.Actor{ID: audit.Operator})

	l.clock.Advance(time.Hour)
	acct, err := l.mgr.SuspendAccount(ctx, "acct", "unpaid invoice")
	if err != nil || acct.State != auth.AccountSuspended || !acct.StateChangedAt.Equal(lifecycleT0.Add(time.Hour)) {
		t.Fatalf("SuspendAccount: %+v %v", acct, err)
	}
	if got := l.changes.take(); !slices.Equal(got, []string{"account.suspended acct  unpaid invoice"}) {
		t.Errorf("published %q", got)
	}
	wantCodeSays(t, "a call", l.callWith(l.key), tollgate.CodeAccountSuspended, "contact the operator")
	// Suspending again changes nothing.
	l.clock.Advance(time.Hour)
	again, err := l.mgr.SuspendAccount(ctx, "acct", "again")
	if err != nil || again.Revision != acct.Revision || !again.StateChangedAt.Equal(acct.StateChangedAt) {
		t.Errorf("suspending a suspended account: %+v %v, want it as it was (%+v)", again, err, acct)
	}
	if got := l.changes.take(); len(got) != 0 {
		t.Errorf("suspending a suspended account published %q", got)
	}

	acct, err = l.mgr.ReactivateAccount(ctx, "acct", "")
	if err != nil || acct.State != auth.AccountActive || !acct.StateChangedAt.Equal(lifecycleT0.Add(2*time.Hour)) {
		t.Fatalf("ReactivateAccount: %+v %v", acct, err)
	}
	if _, err := l.mgr.ReactivateAccount(ctx, "acct", "twice"); err != nil {
		t.Fatal(err)
	}
	if got := l.changes.take(); !slices.Equal(got, []string{"account.reactivated acct"}) {
		t.Errorf("published %q", got)
	}
	if err := l.callWith(l.key); err != nil {
		t.Errorf("a call after the reactivation: %v", err)
	}

	acct, err = l.mgr.CloseAccount(ctx, "acct", "the customer left")
	if err != nil || acct.State != auth.AccountClosed {
		t.Fatalf("CloseAccount: %+v %v", acct, err)
	}
	want := []string{"account.closed acct  the customer left", "key.revoked acct " + l.primary.ID, "key.revoked acct " + l.sub.ID}
	if got := l.changes.take(); !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}
	for _, v := range []string{l.key, l.subKey} {
		err := l.callWith(v)
		wantCodeSays(t, "a key of the closed account", err, tollgate.CodeForbidden)
		if err != nil && err.Error() != "the API key has been revoked; use another key of the account" {
			t.Errorf("a key of the closed account: %q, want a revoked key's answer", err)
		}
	}
	for what, err := range map[string]error{
		"suspending":   func() error { _, err := l.mgr.SuspendAccount(ctx, "acct", "x"); return err }(),
		"reactivating": func() error { _, err := l.mgr.ReactivateAccount(ctx, "acct", ""); return err }(),
		"a new key":    func() error { _, _, err := l.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "late"}); return err }(),
	} {
		wantCodeSays(t, what+" a closed account", err, tollgate.CodeConflict, "closed")
	}
	if got := l.changes.take(); len(got) != 0 {
		t.Errorf("refused changes published %q", got)
	}

	page, err := l.mgr.AuditLog(t.Context(), audit.Query{Account: "acct", Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range page.Entries {
		actions = append(actions, fmt.Sprintf("%s %s %s %s", e.Actor, e.Action, e.Target, e.Reason))
	}
	wantActions := []string{
		"operator key.revoke " + l.sub.ID + " ", "operator key.revoke " + l.primary.ID + " ",
		"operator account.close  the customer left", "operator account.reactivate  ",
		"operator account.suspend  unpaid invoice", "host key.create " + l.sub.ID + " ",
	}
	// Entries of one instant are listed newest first by their sequence.
	if !slices.Equal(actions, wantActions) {
		t.Errorf("audit log:\n got %q\nwant %q", actions, wantActions)
	}
}

// TestCloseFinishes: a closure that left a key live (an outage, a key created while it
// ran) is finished by closing again, which revokes that key and publishes no second
// closure; the key is refused as revoked before that all the same.
func TestCloseFinishes(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	ctx := t.Context()
	if _, err := l.mgr.CloseAccount(ctx, "acct", "fraud"); err != nil {
		t.Fatal(err)
	}
	l.changes.take()
	// A key the closure did not reach, written to the store directly.
	value := auth.NewKeyValue()
	late := auth.Key{ID: "key_late", AccountID: "acct", Name: "late", Hash: auth.HashKey(value), CreatedAt: lifecycleT0}
	if err := l.stores.Keys.CreateKey(ctx, late, auth.KeyLimit{}); err != nil {
		t.Fatal(err)
	}
	wantCodeSays(t, "a live key of a closed account", l.callWith(value), tollgate.CodeForbidden, "revoked")
	acct, err := l.mgr.CloseAccount(ctx, "acct", "fraud")
	if err != nil || acct.State != auth.AccountClosed {
		t.Fatalf("closing again: %+v %v", acct, err)
	}
	if got := l.changes.take(); !slices.Equal(got, []string{"key.revoked acct key_late"}) {
		t.Errorf("closing again published %q, want the late key's revocation alone", got)
	}
	if k, err := l.mgr.RevokeKey(ctx, "key_late"); err != nil || !k.Revoked() {
		t.Errorf("the late key: %+v %v, want revoked", k, err)
	}
}

// TestDeleteAccount: only a closed account is deleted, once the retention has passed
// since its closure; a deletion before is refused with the moment it becomes possible.
func TestDeleteAccount(t *testing.T) {
	l := newLifecycle(t, accounts.Options{ClosedRetention: 30 * 24 * time.Hour})
	ctx := t.Context()
	wantCodeSays(t, "deleting an active account", l.mgr.DeleteAccount(ctx, "acct"), tollgate.CodeConflict, "is active", "close it first", "30 days")
	if _, err := l.mgr.CloseAccount(ctx, "acct", "done"); err != nil {
		t.Fatal(err)
	}
	acct, _ := l.mgr.Account(ctx, "acct")
	if got, want := l.mgr.DeletableAt(acct.Account), lifecycleT0.Add(30*24*time.Hour); !got.Equal(want) {
		t.Errorf("DeletableAt = %v, want %v", got, want)
	}
	l.clock.Advance(30*24*time.Hour - time.Second)
	wantCodeSays(t, "deleting within the retention", l.mgr.DeleteAccount(ctx, "acct"), tollgate.CodeConflict,
		"closed at 2030-01-15T12:00:00Z", "kept for 30 days", "deleted from 2030-02-14T12:00:00Z")
	l.changes.take()
	l.clock.Advance(time.Second)
	if err := l.mgr.DeleteAccount(ctx, "acct"); err != nil {
		t.Fatalf("deleting after the retention: %v", err)
	}
	if got := l.changes.take(); !slices.Equal(got, []string{"account.deleted acct"}) {
		t.Errorf("published %q", got)
	}
	_, err := l.mgr.Account(ctx, "acct")
	wantCodeSays(t, "the deleted account", err, tollgate.CodeNotFound)
	wantCodeSays(t, "deleting it again", l.mgr.DeleteAccount(ctx, "acct"), tollgate.CodeNotFound)
	wantCodeSays(t, "a key of the deleted account", l.callWith(l.key), tollgate.CodeUnauthorized)
	// Its id is not taken again: its balance, usage and audit log outlive it, and a
	// new account with the id would inherit them.
	_, _, _, err = l.mgr.CreateAccount(ctx, accounts.Spec{ID: "acct", Plan: "p"})
	wantCodeSays(t, "a new account with the deleted one's id", err, tollgate.CodeConflict, "deleted", "choose another id")
	page, err := l.mgr.AuditLog(ctx, audit.Query{Account: "acct", Limit: 1})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Action != audit.AccountDelete {
		t.Errorf("audit log %+v %v, want the deletion last", page.Entries, err)
	}

	// A negative retention deletes a closed account at once.
	now := newLifecycle(t, accounts.Options{ClosedRetention: -1})
	if _, err := now.mgr.CloseAccount(ctx, "acct", "done"); err != nil {
		t.Fatal(err)
	}
	if err := now.mgr.DeleteAccount(ctx, "acct"); err != nil {
		t.Errorf("deleting with a negative retention: %v", err)
	}
}

// TestDefaultClosedRetention: by default a closed account is kept 90 days.
func TestDefaultClosedRetention(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	if _, err := l.mgr.CloseAccount(t.Context(), "acct", "done"); err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(89 * 24 * time.Hour)
	wantCodeSays(t, "after 89 days", l.mgr.DeleteAccount(t.Context(), "acct"), tollgate.CodeConflict, "90 days")
	l.clock.Advance(24 * time.Hour)
	if err := l.mgr.DeleteAccount(t.Context(), "acct"); err != nil {
		t.Errorf("after 90 days: %v", err)
	}
}

// TestLifecycleRefusals: bad ids and reasons are refused before any store is asked;
// suspension and closure need a reason.
func TestLifecycleRefusals(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	ctx := t.Context()
	for _, tt := range []struct {
		what string
		err  error
		code tollgate.Code
		part string
	}{
		{"no reason to suspend", second(l.mgr.SuspendAccount(ctx, "acct", " ")), tollgate.CodeInvalidInput, "reason is required"},
		{"no reason to close", second(l.mgr.CloseAccount(ctx, "acct", "")), tollgate.CodeInvalidInput, "reason is required"},
		{"a reason with a line break", second(l.mgr.ReactivateAccount(ctx, "acct", "a\nb")), tollgate.CodeInvalidInput, "reason"},
		{"a long reason", second(l.mgr.SuspendAccount(ctx, "acct", strings.Repeat("x", 501))), tollgate.CodeInvalidInput, "reason"},
		{"an unknown account", second(l.mgr.SuspendAccount(ctx, "nobody", "x")), tollgate.CodeNotFound, "nobody"},
		{"a bad id", second(l.mgr.CloseAccount(ctx, "a\x00", "x")), tollgate.CodeInvalidInput, "account_id"},
		{"deleting an unknown account", l.mgr.DeleteAccount(ctx, "nobody"), tollgate.CodeNotFound, "nobody"},
	} {
		wantCodeSays(t, tt.what, tt.err, tt.code, tt.part)
	}
	if got := l.changes.take(); len(got) != 0 {
		t.Errorf("refusals published %q", got)
	}
}

func second[T any](_ T, err error) error { return err }

// racingKeys is a key store whose account updates lose to another change of the
// account, made just before them, the first races times (-1: always).
type racingKeys struct {
	*memory.KeyStore
	races atomic.Int32
}

func (r *racingKeys) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (auth.Account, error) {
	if r.races.Load() != 0 {
		r.races.Add(-1)
		acct, err := r.KeyStore.Account(ctx, u.ID)
		if err != nil {
			return auth.Account{}, err
		}
		// The other writer's update, with a context of its own: not the journal entry
		// of the update it races with.
		if _, err := r.KeyStore.UpdateAccount(context.Background(), acct.Update()); err != nil {
			return auth.Account{}, err
		}
	}
	return r.KeyStore.UpdateAccount(ctx, u)
}

// TestLifecycleRace: a change that lost to another one is decided again on the new
// record; one that keeps losing is a conflict, and changes nothing.
func TestLifecycleRace(t *testing.T) {
	keys := &racingKeys{KeyStore: memory.NewKeyStore()}
	h := newHarness(t, harnessOptions{keys: keys})
	ctx := t.Context()
	keys.races.Store(2)
	acct, err := h.mgr.SuspendAccount(ctx, "acct", "abuse")
	if err != nil || acct.State != auth.AccountSuspended || acct.Revision != 3 {
		t.Fatalf("SuspendAccount after two lost races: %+v %v, want suspended at revision 3", acct, err)
	}
	keys.races.Store(-1)
	_, err = h.mgr.ReactivateAccount(ctx, "acct", "")
	wantCodeSays(t, "a reactivation that always loses", err, tollgate.CodeConflict, "retry")
	if info, _ := h.mgr.Account(ctx, "acct"); info.Account.State != auth.AccountSuspended {
		t.Errorf("the account is %s, want still suspended", info.Account.State)
	}
}

// TestAccounts lists accounts a page at a time with filters, and refuses a query out
// of bounds naming the parameter.
func TestAccounts(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	ctx := t.Context()
	for i := range 5 {
		l.clock.Advance(time.Hour)
		if _, _, _, err := l.mgr.CreateAccount(ctx, accounts.Spec{ID: fmt.Sprintf("team-%d", i), Plan: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.mgr.SuspendAccount(ctx, "team-1", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.mgr.CloseAccount(ctx, "team-3", "x"); err != nil {
		t.Fatal(err)
	}
	list := func(q auth.AccountQuery) []string {
		t.Helper()
		var ids []string
		for {
			page, err := l.mgr.Accounts(ctx, q)
			if err != nil {
				t.Fatalf("Accounts(%+v): %v", q, err)
			}
			for _, a := range page.Accounts {
				ids = append(ids, a.ID+":"+string(a.State))
			}
			if page.Next == "" {
				return ids
			}
			q.After = page.Next
		}
	}
	for _, tt := range []struct {
		q    auth.AccountQuery
		want []string
	}{
		{auth.AccountQuery{}, []string{"acct:active", "team-0:active", "team-1:suspended", "team-2:active", "team-3:closed", "team-4:active"}},
		{auth.AccountQuery{Limit: 2}, []string{"acct:active", "team-0:active", "team-1:suspended", "team-2:active", "team-3:closed", "team-4:active"}},
		{auth.AccountQuery{State: auth.AccountActive, Limit: 1}, []string{"acct:active", "team-0:active", "team-2:active", "team-4:active"}},
		{auth.AccountQuery{State: auth.AccountSuspended}, []string{"team-1:suspended"}},
		{auth.AccountQuery{IDPrefix: "team-", CreatedFrom: lifecycleT0.Add(2 * time.Hour), CreatedBefore: lifecycleT0.Add(4 * time.Hour)}, []string{"team-1:suspended", "team-2:active"}},
		{auth.AccountQuery{Plan: "other"}, nil},
	} {
		if got := list(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("Accounts(%+v) = %q, want %q", tt.q, got, tt.want)
		}
	}
	for _, tt := range []struct {
		q    auth.AccountQuery
		part string
	}{
		{auth.AccountQuery{Limit: -1}, "limit"},
		{auth.AccountQuery{Limit: auth.MaxAccountPage + 1}, "limit"},
		{auth.AccountQuery{State: "gone"}, "state"},
		{auth.AccountQuery{IDPrefix: "a\x00"}, "id_prefix"},
		{auth.AccountQuery{Plan: strings.Repeat("p", 65)}, "plan"},
		{auth.AccountQuery{After: "\xff"}, "cursor"},
		{auth.AccountQuery{CreatedFrom: lifecycleT0, CreatedBefore: lifecycleT0}, "created_from"},
	} {
		_, err := l.mgr.Accounts(ctx, tt.q)
		wantCodeSays(t, fmt.Sprintf("Accounts(%+v)", tt.q), err, tollgate.CodeInvalidInput, tt.part)
	}
}

// TestSuspendedHolder: the holder of a suspended account signs in, reads the account
// (its state shown), its keys and audit log, and revokes keys; it cannot create, rotate
// or change keys. A closed account's holder is refused as a revoked key is.
func TestSuspendedHolder(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	ctx := t.Context()
	if _, err := l.mgr.SuspendAccount(ctx, "acct", "review"); err != nil {
		t.Fatal(err)
	}
	c := l.caller()
	c.Channel = 0
	info, err := l.mgr.OwnAccount(ctx, c)
	if err != nil || info.Account.State != auth.AccountSuspended || len(info.Keys) != 2 {
		t.Fatalf("OwnAccount: %+v %v", info, err)
	}
	if _, err := l.mgr.OwnAuditLog(ctx, c, audit.Query{}); err != nil {
		t.Errorf("OwnAuditLog: %v", err)
	}
	name := "renamed"
	for what, err := range map[string]error{
		"creating a key": func() error { _, _, err := l.mgr.CreateOwnKey(ctx, c, accounts.NewKey{Name: "new"}); return err }(),
		"rotating a key": func() error { _, _, err := l.mgr.RotateOwnKey(ctx, c, l.sub.ID); return err }(),
		"changing a key": func() error {
			_, err := l.mgr.UpdateOwnKey(ctx, c, l.sub.ID, accounts.KeyChange{Name: &name})
			return err
		}(),
	} {
		wantCodeSays(t, what, err, tollgate.CodeAccountSuspended, "suspended", "contact the operator")
	}
	if k, err := l.mgr.RevokeOwnKey(ctx, c, l.sub.ID); err != nil || !k.Revoked() {
		t.Errorf("revoking a key: %+v %v", k, err)
	}

	if _, err := l.mgr.CloseAccount(ctx, "acct", "done"); err != nil {
		t.Fatal(err)
	}
	_, err = l.mgr.OwnAccount(ctx, c)
	wantCodeSays(t, "the holder of a closed account", err, tollgate.CodeForbidden, "revoked")
}

// TestLifecycleHolderAudit: the holder reads the changes of state in its audit log
// without the operator's reasons, which are the operator's notes.
func TestLifecycleHolderAudit(t *testing.T) {
	l := newLifecycle(t, accounts.Options{})
	ctx := accounts.WithActor(t.Context(), event.Actor{ID: audit.Operator})
	if _, err := l.mgr.SuspendAccount(ctx, "acct", "suspected fraud"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.mgr.ReactivateAccount(ctx, "acct", "cleared"); err != nil {
		t.Fatal(err)
	}
	c := l.caller()
	c.Channel = 0
	page, err := l.mgr.OwnAuditLog(t.Context(), c, audit.Query{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		if e.Reason != "" || e.Actor != audit.Operator {
			t.Errorf("the holder sees %+v, want the operator without a reason", e)
		}
	}
	if len(page.Entries) != 2 || page.Entries[0].Action != audit.AccountReactivate || page.Entries[1].Action != audit.AccountSuspend {
		t.Errorf("the holder's audit log: %+v", page.Entries)
	}
}

// closingKeys is a key store that runs change, once, just before it stores a new key
// (a change made between the manager's read of the account and the key's creation),
// or just after it stored it, if after is set.
type closingKeys struct {
	*memory.KeyStore
	change atomic.Pointer[func()]
	after  bool
}

func (c *closingKeys) CreateKey(ctx context.Context, key auth.Key, limit auth.KeyLimit) error {
	f := c.change.Swap(nil)
	if f != nil && !c.after {
		(*f)()
	}
	err := c.KeyStore.CreateKey(ctx, key, limit)
	if f != nil && c.after {
		(*f)()
	}
	return err
}

// TestCloseRacesKeyCreation: a key created while the account is being closed (after
// the manager read the account, before the key is stored, the closure revoked every
// key it found) is not left live: the creation is refused as for a closed account, and
// every key of the account is revoked. One whose account was closed and deleted just
// after it was stored is not answered as created either.
func TestCloseRacesKeyCreation(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		keys := &closingKeys{KeyStore: memory.NewKeyStore(), after: deleted}
		h := newHarness(t, harnessOptions{keys: keys, accounts: accounts.Options{ClosedRetention: -1}})
		ctx := t.Context()
		closeNow := func() {
			if _, err := h.mgr.CloseAccount(ctx, "acct", "the customer left"); err != nil {
				t.Error(err)
			}
			if deleted {
				if err := h.mgr.DeleteAccount(ctx, "acct"); err != nil {
					t.Error(err)
				}
			}
		}
		keys.change.Store(&closeNow)
		_, value, err := h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "late"})
		if deleted {
			wantCodeSays(t, "a key created while the account was deleted", err, tollgate.CodeNotFound, "acct")
		} else {
			wantCodeSays(t, "a key created while the account was closed", err, tollgate.CodeConflict, "closed")
		}
		if value != "" {
			t.Errorf("the refused creation returned a key value")
		}
		page, err := keys.Keys(ctx, auth.KeyQuery{Account: "acct", Limit: auth.MaxKeyPage})
		if deleted && errors.Is(err, store.ErrNotFound) {
			continue // the account and its keys are gone
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page.Keys {
			if !k.Revoked() {
				t.Errorf("key %s (%s) of the closed account is live", k.ID, k.Name)
			}
		}
	}
}
