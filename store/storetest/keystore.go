package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store"
)

// TestKeyStore checks that an [auth.KeyStore] behaves as its documentation says.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestKeyStore(t *testing.T, newStore func(t *testing.T) auth.KeyStore) {
	t.Helper()
	run(t, newStore, slices.Concat(keyStoreRows, keyBoundRows, accountRows))
}

var keyStoreRows = []behaviour[auth.KeyStore]{
	{"BadText",
		"Text a store cannot hold (a NUL byte, invalid UTF-8) in an id or a name is refused with store.ErrInvalid, and looking up by it finds nothing; neither is an outage.",
		ksBadText},
	{"CreateAccountThenRead",
		"An account created with its primary key is returned, every field intact, by Account, Key, Keys and Resolve.",
		ksCreateAccountThenRead},
	{"ReadMissing",
		"Account and Key of an unknown id return an error wrapping store.ErrNotFound.",
		ksReadMissing},
	{"CreateAccountDuplicateID",
		"CreateAccount with a taken account id returns store.ErrConflict and stores nothing of the new account or its key.",
		ksCreateAccountDuplicateID},
	{"CreateAccountDuplicateKeyID",
		"CreateAccount whose primary key id is taken returns store.ErrConflict and the account does not exist afterwards.",
		ksCreateAccountDuplicateKeyID},
	{"CreateAccountDuplicateHash",
		"CreateAccount whose primary key hash is taken returns store.ErrConflict and the account does not exist afterwards.",
		ksCreateAccountDuplicateHash},
	{"CreateKeyThenRead",
		"A key created for an existing account is returned, every field intact, by Key, Keys and Resolve.",
		ksCreateKeyThenRead},
	{"CreateKeyMissingAccount",
		"CreateKey for an account that does not exist returns store.ErrNotFound and stores nothing.",
		ksCreateKeyMissingAccount},
	{"CreateKeyDuplicateID",
		"CreateKey with a taken key id returns store.ErrConflict and leaves the existing key as it was.",
		ksCreateKeyDuplicateID},
	{"CreateKeyDuplicateHash",
		"CreateKey with a hash that another key has returns store.ErrConflict and the hash still resolves to the first key.",
		ksCreateKeyDuplicateHash},
	{"KeysOldestFirst",
		"Keys returns exactly the account's keys, oldest first.",
		ksKeysOldestFirst},
	{"KeysMissingAccount",
		"Keys of an account that does not exist returns store.ErrNotFound.",
		ksKeysMissingAccount},
	{"ResolveUnknownHash",
		"Resolve of a hash that no key has returns store.ErrNotFound.",
		ksResolveUnknownHash},
	{"RotateKey",
		"RotateKey makes the old hash match nothing on the very next Resolve, makes the new hash resolve to the same key id, and records RotatedAt.",
		ksRotateKey},
	{"RotateToTakenHash",
		"RotateKey to a hash that another key has returns store.ErrConflict and changes neither key.",
		ksRotateToTakenHash},
	{"RotateRevokedKey",
		"RotateKey of a revoked key returns store.ErrConflict and leaves its hash in place.",
		ksRotateRevokedKey},
	{"RotateMissingKey",
		"RotateKey of an unknown key id returns store.ErrNotFound.",
		ksRotateMissingKey},
	{"RotateKeyAtRevision",
		"RotateKey naming a revision the key no longer has returns store.ErrConflict and changes nothing (the old hash still resolves, the new one does not); naming the key's revision (0 for a new key: it is a revision like any other) rotates it; auth.AnyRevision rotates whatever the revision.",
		ksRotateKeyAtRevision},
	{"RevokeKey",
		"RevokeKey records RevokedAt, and the very next Resolve still returns the key, marked revoked, so the caller can refuse it.",
		ksRevokeKey},
	{"RevokeTwice",
		"Revoking a revoked key is not an error and keeps the first RevokedAt.",
		ksRevokeTwice},
	{"RevokeKeyAtRevision",
		"RevokeKey naming a revision the key no longer has returns store.ErrConflict and changes nothing, whether the key is live or revoked; naming the key's revision revokes it (and, once revoked, changes nothing and is not an error); auth.AnyRevision revokes whatever the revision.",
		ksRevokeKeyAtRevision},
	{"RevokeMissingKey",
		"RevokeKey of an unknown key id returns store.ErrNotFound.",
		ksRevokeMissingKey},
	{"UpdateKey",
		"UpdateKey replaces the name and restrictions, keeps the hash and the other fields, increases the revision, and the very next Key, Keys and Resolve return the change.",
		ksUpdateKey},
	{"UpdateKeyStale",
		"UpdateKey naming a revision the key no longer has returns store.ErrConflict and changes nothing.",
		ksUpdateKeyStale},
	{"UpdateRevokedKey",
		"UpdateKey of a revoked key returns store.ErrConflict and changes nothing.",
		ksUpdateRevokedKey},
	{"UpdateMissingKey",
		"UpdateKey of an unknown key id returns store.ErrNotFound.",
		ksUpdateMissingKey},
	{"UpdateKeyBadName",
		"UpdateKey with a name a store cannot hold (a NUL byte, invalid UTF-8) returns store.ErrInvalid and changes nothing.",
		ksUpdateKeyBadName},
	{"RevisionCountsChanges",
		"A new key has revision 0; each rotation, the first revocation and each update increase it, and a second revocation does not.",
		ksRevisionCountsChanges},
	{"ConcurrentUpdate",
		"Of many goroutines updating a key from the same revision at once, exactly one succeeds and the others get store.ErrConflict.",
		ksConcurrentUpdate},
	{"ErrorsNameTheID",
		"An error reporting store.ErrNotFound or store.ErrConflict names the account or key id in its message.",
		ksErrorsNameTheID},
	{"NoAliasing",
		"The store keeps no reference to values passed in or returned: changing them afterwards changes nothing stored.",
		ksNoAliasing},
	{"CanceledContext",
		"Every method given a canceled context returns an error matching context.Canceled and changes nothing.",
		ksCanceledContext},
	{"ConcurrentCreateDistinct",
		"Accounts and keys with distinct ids and hashes created from many goroutines at once are all stored.",
		ksConcurrentCreateDistinct},
	{"ConcurrentCreateSameKeyID",
		"Of many goroutines creating a key with the same id at once, exactly one succeeds and the others get store.ErrConflict.",
		ksConcurrentCreateSameKeyID},
	{"ConcurrentCreateSameAccountID",
		"Of many goroutines creating an account with the same id at once, exactly one succeeds, the others get store.ErrConflict and leave no key behind.",
		ksConcurrentCreateSameAccountID},
	{"ConcurrentRotate",
		"After many concurrent rotations of one key, exactly one of the new hashes works and it is the one Key reports, with its RotatedAt.",
		ksConcurrentRotate},
	{"ConcurrentRevoke",
		"Concurrent revocations of one key all succeed and all report the same, first, RevokedAt.",
		ksConcurrentRevoke},
	{"RotatedAwayHashDeadForConcurrentReaders",
		"Once RotateKey has returned, no Resolve begun afterwards, from any goroutine, matches the old hash (no cache may delay it).",
		ksRotatedAwayHashDead},
}

// workers is the number of goroutines of the concurrent checks.
const workers = 64

// restrictions builds restrictions from their plain form.
func restrictions(t *testing.T, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	must(t, "auth.NewRestrictions", err)
	return r
}

// newAccount returns an account, with restrictions, and its primary key, restricted
// further.
func newAccount(t *testing.T, n ids, label string) (auth.Account, auth.Key) {
	t.Helper()
	acctExp, keyExp := at(365*24*time.Hour), at(180*24*time.Hour)
	a := auth.Account{
		ID:   n.id(label),
		Plan: "pro",
		Restrictions: restrictions(t, auth.RestrictionSpec{
			APIs:       []string{"hash", "echo", "date-info"},
			Channels:   []string{"rest", "mcp"},
			AllowedIPs: []string{"10.0.0.0/8", "2001:db8::/32"},
			ExpiresAt:  &acctExp,
		}),
		CreatedAt: t0,
	}
	k := auth.Key{
		ID:        n.id(label + "-primary"),
		AccountID: a.ID,
		Name:      "primary",
		Primary:   true,
		Hash:      newHash(),
		Restrictions: restrictions(t, auth.RestrictionSpec{
			APIs:       []string{"hash"},
			Channels:   []string{"rest"},
			AllowedIPs: []string{"10.1.0.0/16", "203.0.113.7"},
			ExpiresAt:  &keyExp,
		}),
		CreatedAt: t0,
	}
	return a, k
}

// plainAccount returns an account and primary key without restrictions; safe to call
// from any goroutine.
func plainAccount(n ids, label string) (auth.Account, auth.Key) {
	a := auth.Account{ID: n.id(label), Plan: "free", CreatedAt: t0}
	k := auth.Key{ID: n.id(label + "-primary"), AccountID: a.ID, Name: "primary", Primary: true, Hash: newHash(), CreatedAt: t0}
	return a, k
}

// newKey returns a further key of acct, created at the given moment.
func newKey(n ids, acct auth.Account, label string, created time.Time) auth.Key {
	return auth.Key{ID: n.id(label), AccountID: acct.ID, Name: label, Hash: newHash(), CreatedAt: created}
}

// createAccount stores a fresh account with its primary key.
func createAccount(t *testing.T, s auth.KeyStore, n ids, label string) (auth.Account, auth.Key) {
	t.Helper()
	a, k := newAccount(t, n, label)
	must(t, "CreateAccount", s.CreateAccount(t.Context(), a, k))
	return a, k
}

// createKey stores a further key of acct, restricted to one API.
func createKey(t *testing.T, s auth.KeyStore, n ids, acct auth.Account, label string, created time.Time) auth.Key {
	t.Helper()
	k := newKey(n, acct, label, created)
	k.Restrictions = restrictions(t, auth.RestrictionSpec{APIs: []string{"echo"}})
	must(t, "CreateKey", s.CreateKey(t.Context(), k, auth.KeyLimit{}))
	return k
}

func diffTime(name string, got, want time.Time) string {
	if got.Equal(want) {
		return ""
	}
	return fmt.Sprintf("%s %v, want %v", name, got, want)
}

func diffSpec(got, want auth.RestrictionSpec) string {
	var d []string
	if !slices.Equal(got.APIs, want.APIs) {
		d = append(d, fmt.Sprintf("APIs %q, want %q", got.APIs, want.APIs))
	}
	if !slices.Equal(got.Channels, want.Channels) {
		d = append(d, fmt.Sprintf("Channels %q, want %q", got.Channels, want.Channels))
	}
	if !slices.Equal(got.AllowedIPs, want.AllowedIPs) {
		d = append(d, fmt.Sprintf("AllowedIPs %q, want %q", got.AllowedIPs, want.AllowedIPs))
	}
	switch {
	case got.ExpiresAt == nil && want.ExpiresAt == nil:
	case got.ExpiresAt == nil || want.ExpiresAt == nil || !got.ExpiresAt.Equal(*want.ExpiresAt):
		d = append(d, fmt.Sprintf("ExpiresAt %v, want %v", got.ExpiresAt, want.ExpiresAt))
	}
	return strings.Join(d, ", ")
}

func diffAccount(got, want auth.Account) string {
	var d []string
	if got.ID != want.ID {
		d = append(d, fmt.Sprintf("ID %q, want %q", got.ID, want.ID))
	}
	if got.Plan != want.Plan {
		d = append(d, fmt.Sprintf("Plan %q, want %q", got.Plan, want.Plan))
	}
	if s := diffSpec(got.Restrictions.Spec(), want.Restrictions.Spec()); s != "" {
		d = append(d, "Restrictions: "+s)
	}
	if got.State != want.State.OrActive() {
		d = append(d, fmt.Sprintf("State %q, want %q", got.State, want.State.OrActive()))
	}
	if got.PendingPlan != want.PendingPlan {
		d = append(d, fmt.Sprintf("PendingPlan %q, want %q", got.PendingPlan, want.PendingPlan))
	}
	if got.Revision != want.Revision {
		d = append(d, fmt.Sprintf("Revision %d, want %d", got.Revision, want.Revision))
	}
	for _, s := range []string{
		diffTime("CreatedAt", got.CreatedAt, want.CreatedAt),
		diffTime("StateChangedAt", got.StateChangedAt, want.StateChangedAt),
		diffTime("BillingAnchor", got.BillingAnchor, want.BillingAnchor),
		diffTime("PendingPlanAt", got.PendingPlanAt, want.PendingPlanAt),
	} {
		if s != "" {
			d = append(d, s)
		}
	}
	return strings.Join(d, "; ")
}

func diffKey(got, want auth.Key) string {
	var d []string
	if got.ID != want.ID {
		d = append(d, fmt.Sprintf("ID %q, want %q", got.ID, want.ID))
	}
	if got.AccountID != want.AccountID {
		d = append(d, fmt.Sprintf("AccountID %q, want %q", got.AccountID, want.AccountID))
	}
	if got.Name != want.Name {
		d = append(d, fmt.Sprintf("Name %q, want %q", got.Name, want.Name))
	}
	if got.Primary != want.Primary {
		d = append(d, fmt.Sprintf("Primary %v, want %v", got.Primary, want.Primary))
	}
	if got.Hash != want.Hash {
		d = append(d, fmt.Sprintf("Hash %.12s…, want %.12s…", got.Hash, want.Hash))
	}
	if s := diffSpec(got.Restrictions.Spec(), want.Restrictions.Spec()); s != "" {
		d = append(d, "Restrictions: "+s)
	}
	for _, s := range []string{
		diffTime("CreatedAt", got.CreatedAt, want.CreatedAt),
		diffTime("RotatedAt", got.RotatedAt, want.RotatedAt),
		diffTime("RevokedAt", got.RevokedAt, want.RevokedAt),
	} {
		if s != "" {
			d = append(d, s)
		}
	}
	return strings.Join(d, "; ")
}

func checkAccount(t *testing.T, op string, got, want auth.Account) {
	t.Helper()
	if d := diffAccount(got, want); d != "" {
		t.Errorf("%s: account differs: %s", op, d)
	}
}

func checkKey(t *testing.T, op string, got, want auth.Key) {
	t.Helper()
	if d := diffKey(got, want); d != "" {
		t.Errorf("%s: key %q differs: %s", op, want.ID, d)
	}
}

func checkKeys(t *testing.T, op string, got, want []auth.Key) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d keys %q, want %d %q", op, len(got), keyIDs(got), len(want), keyIDs(want))
		return
	}
	for i := range got {
		if d := diffKey(got[i], want[i]); d != "" {
			t.Errorf("%s: key #%d (%q) differs: %s", op, i, want[i].ID, d)
		}
	}
}

func keyIDs(keys []auth.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.ID
	}
	return out
}

// wantKey checks that Key(want.ID) returns want.
func wantKey(t *testing.T, s auth.KeyStore, want auth.Key) {
	t.Helper()
	got, err := s.Key(t.Context(), want.ID)
	if err != nil {
		t.Errorf("Key(%q): %v", want.ID, err)
		return
	}
	checkKey(t, "Key", got, want)
}

// wantResolve checks that Resolve(h) returns the key and its account.
func wantResolve(t *testing.T, s auth.KeyStore, h auth.Hash, key auth.Key, acct auth.Account) {
	t.Helper()
	k, a, err := s.Resolve(t.Context(), h)
	if err != nil {
		t.Errorf("Resolve(hash of key %q): %v", key.ID, err)
		return
	}
	checkKey(t, "Resolve", k, key)
	checkAccount(t, "Resolve", a, acct)
}

// wantUnresolved checks that Resolve(h) reports store.ErrNotFound.
func wantUnresolved(t *testing.T, s auth.KeyStore, h auth.Hash, what string) {
	t.Helper()
	k, _, err := s.Resolve(t.Context(), h)
	if err == nil {
		t.Errorf("Resolve(%s) = key %q, want store.ErrNotFound", what, k.ID)
		return
	}
	wantErr(t, "Resolve("+what+")", err, store.ErrNotFound)
}

// wantNoKey checks that Key(id) reports store.ErrNotFound.
func wantNoKey(t *testing.T, s auth.KeyStore, id string) {
	t.Helper()
	_, err := s.Key(t.Context(), id)
	wantErr(t, fmt.Sprintf("Key(%q)", id), err, store.ErrNotFound)
}

// wantNoAccount checks that Account(id) reports store.ErrNotFound.
func wantNoAccount(t *testing.T, s auth.KeyStore, id string) {
	t.Helper()
	_, err := s.Account(t.Context(), id)
	wantErr(t, fmt.Sprintf("Account(%q)", id), err, store.ErrNotFound)
}

func ksCreateAccountThenRead(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")

	got, err := s.Account(ctx, acct.ID)
	must(t, "Account", err)
	checkAccount(t, "Account", got, acct)
	wantKey(t, s, primary)
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary})
	wantResolve(t, s, primary.Hash, primary, acct)
}

func ksReadMissing(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	createAccount(t, s, n, "acct")
	wantNoAccount(t, s, n.id("nobody"))
	wantNoKey(t, s, n.id("no-key"))
}

func ksCreateAccountDuplicateID(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")

	dup, dupKey := newAccount(t, n, "acct")
	dup.Plan = "other"
	dupKey.ID = n.id("second-primary")
	err := s.CreateAccount(ctx, dup, dupKey)
	wantErr(t, "CreateAccount with a taken id", err, store.ErrConflict)

	got, err := s.Account(ctx, acct.ID)
	must(t, "Account", err)
	checkAccount(t, "Account after the refused duplicate", got, acct)
	wantNoKey(t, s, dupKey.ID)
	wantUnresolved(t, s, dupKey.Hash, "hash of the refused primary key")
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary})
}

func ksCreateAccountDuplicateKeyID(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")

	other, otherKey := newAccount(t, n, "other")
	otherKey.ID = primary.ID
	err := s.CreateAccount(ctx, other, otherKey)
	wantErr(t, "CreateAccount with a taken key id", err, store.ErrConflict)

	wantNoAccount(t, s, other.ID)
	wantUnresolved(t, s, otherKey.Hash, "hash of the refused primary key")
	wantKey(t, s, primary)
	wantResolve(t, s, primary.Hash, primary, acct)
}

func ksCreateAccountDuplicateHash(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")

	other, otherKey := newAccount(t, n, "other")
	otherKey.Hash = primary.Hash
	err := s.CreateAccount(ctx, other, otherKey)
	wantErr(t, "CreateAccount with a taken key hash", err, store.ErrConflict)

	wantNoAccount(t, s, other.ID)
	wantNoKey(t, s, otherKey.ID)
	wantResolve(t, s, primary.Hash, primary, acct)
}

func ksCreateKeyThenRead(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))

	wantKey(t, s, k)
	wantResolve(t, s, k.Hash, k, acct)
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary, k})
}

func ksCreateKeyMissingAccount(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	createAccount(t, s, n, "acct")
	ghost := auth.Account{ID: n.id("ghost")}
	k := newKey(n, ghost, "orphan", t0)

	err := s.CreateKey(ctx, k, auth.KeyLimit{})
	wantErr(t, "CreateKey for a missing account", err, store.ErrNotFound)
	wantNoKey(t, s, k.ID)
	wantUnresolved(t, s, k.Hash, "hash of the refused key")
	wantNoAccount(t, s, ghost.ID)
}

func ksCreateKeyDuplicateID(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))

	dup := newKey(n, acct, "ci", at(2*time.Minute))
	dup.Name = "impostor"
	err := s.CreateKey(ctx, dup, auth.KeyLimit{})
	wantErr(t, "CreateKey with a taken id", err, store.ErrConflict)

	wantKey(t, s, k)
	wantUnresolved(t, s, dup.Hash, "hash of the refused key")
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary, k})
}

func ksCreateKeyDuplicateHash(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	other, otherPrimary := createAccount(t, s, n, "other")

	dup := newKey(n, acct, "dup", at(time.Minute))
	dup.Hash = otherPrimary.Hash
	err := s.CreateKey(ctx, dup, auth.KeyLimit{})
	wantErr(t, "CreateKey with a hash of another account's key", err, store.ErrConflict)

	dup2 := newKey(n, acct, "dup2", at(time.Minute))
	dup2.Hash = primary.Hash
	err = s.CreateKey(ctx, dup2, auth.KeyLimit{})
	wantErr(t, "CreateKey with a hash of the same account's key", err, store.ErrConflict)

	wantNoKey(t, s, dup.ID)
	wantNoKey(t, s, dup2.ID)
	wantResolve(t, s, otherPrimary.Hash, otherPrimary, other)
	wantResolve(t, s, primary.Hash, primary, acct)
}

func ksKeysOldestFirst(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	other, _ := createAccount(t, s, n, "other")
	want := []auth.Key{primary}
	for i := 1; i <= 5; i++ {
		want = append(want, createKey(t, s, n, acct, fmt.Sprintf("k%d", i), at(time.Duration(i)*time.Minute)))
		createKey(t, s, n, other, fmt.Sprintf("other-k%d", i), at(time.Duration(i)*time.Minute))
	}
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, want)
}

func ksKeysMissingAccount(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	createAccount(t, s, n, "acct")
	keys, err := allKeys(t.Context(), s, n.id("ghost"))
	if wantErr(t, "Keys of a missing account", err, store.ErrNotFound) && len(keys) != 0 {
		t.Errorf("Keys of a missing account returned %d keys along with the error", len(keys))
	}
}

func ksResolveUnknownHash(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	createAccount(t, s, n, "acct")
	wantUnresolved(t, s, newHash(), "a hash no key has")
	wantUnresolved(t, s, auth.Hash{}, "the zero hash")
}

func ksRotateKey(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	original := k.Hash
	wantResolve(t, s, original, k, acct) // as a caller would, before the rotation

	h1 := newHash()
	got, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, h1, at(time.Hour))
	must(t, "RotateKey", err)
	want := k
	want.Hash, want.RotatedAt = h1, at(time.Hour)
	checkKey(t, "RotateKey result", got, want)
	wantUnresolved(t, s, original, "old hash, right after RotateKey")
	wantResolve(t, s, h1, want, acct)
	wantKey(t, s, want)

	h2 := newHash()
	got, err = s.RotateKey(ctx, k.ID, auth.AnyRevision, h2, at(2*time.Hour))
	must(t, "second RotateKey", err)
	want.Hash, want.RotatedAt = h2, at(2*time.Hour)
	checkKey(t, "second RotateKey result", got, want)
	wantUnresolved(t, s, original, "first hash, after two rotations")
	wantUnresolved(t, s, h1, "second hash, after two rotations")
	wantResolve(t, s, h2, want, acct)

	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary, want})
	wantResolve(t, s, primary.Hash, primary, acct)
}

func ksRotateToTakenHash(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	other, otherPrimary := createAccount(t, s, n, "other")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))

	_, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, primary.Hash, at(time.Hour))
	wantErr(t, "RotateKey to the hash of a key of the same account", err, store.ErrConflict)
	_, err = s.RotateKey(ctx, k.ID, auth.AnyRevision, otherPrimary.Hash, at(time.Hour))
	wantErr(t, "RotateKey to the hash of a key of another account", err, store.ErrConflict)

	wantKey(t, s, k)
	wantResolve(t, s, k.Hash, k, acct)
	wantResolve(t, s, primary.Hash, primary, acct)
	wantResolve(t, s, otherPrimary.Hash, otherPrimary, other)
}

// createRevokedKey stores an account and a further key, revoked at one hour.
func createRevokedKey(t *testing.T, s auth.KeyStore) (auth.Account, auth.Key, auth.Key) {
	t.Helper()
	n := newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	revoked, err := s.RevokeKey(t.Context(), k.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey", err)
	return acct, k, revoked
}

func ksRotateRevokedKey(t *testing.T, s auth.KeyStore) {
	ctx := t.Context()
	acct, k, _ := createRevokedKey(t, s)

	h := newHash()
	_, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, h, at(2*time.Hour))
	wantErr(t, "RotateKey of a revoked key", err, store.ErrConflict)

	want := k
	want.RevokedAt = at(time.Hour)
	wantResolve(t, s, k.Hash, want, acct)
	wantUnresolved(t, s, h, "hash given to the refused rotation")
}

func ksRotateMissingKey(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	createAccount(t, s, n, "acct")
	h := newHash()
	_, err := s.RotateKey(t.Context(), n.id("ghost"), auth.AnyRevision, h, at(time.Hour))
	wantErr(t, "RotateKey of a missing key", err, store.ErrNotFound)
	wantUnresolved(t, s, h, "hash given to the refused rotation")
}

// widenKey updates key k, at its revision, to a wider set of restrictions (no API
// list), as another writer would between a caller's reading of k and its change.
func widenKey(t *testing.T, s auth.KeyStore, k auth.Key) auth.Key {
	t.Helper()
	wide, err := s.UpdateKey(t.Context(), auth.KeyUpdate{ID: k.ID, Name: k.Name, Revision: k.Revision})
	must(t, "UpdateKey", err)
	return wide
}

func ksRotateKeyAtRevision(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	wide := widenKey(t, s, k)

	h := newHash()
	_, err := s.RotateKey(ctx, k.ID, k.Revision, h, at(time.Hour))
	wantErr(t, "RotateKey at the revision before an update", err, store.ErrConflict)
	wantKey(t, s, wide)
	wantRevision(t, s, k.ID, wide.Revision, "a refused RotateKey")
	wantResolve(t, s, k.Hash, wide, acct)
	wantUnresolved(t, s, h, "hash given to the refused rotation")

	got, err := s.RotateKey(ctx, k.ID, wide.Revision, h, at(time.Hour))
	must(t, "RotateKey at the key's revision", err)
	want := wide
	want.Hash, want.RotatedAt = h, at(time.Hour)
	checkKey(t, "RotateKey at the key's revision", got, want)
	if got.Revision != wide.Revision+1 {
		t.Errorf("RotateKey at the key's revision: Revision %d, want %d", got.Revision, wide.Revision+1)
	}
	wantUnresolved(t, s, k.Hash, "old hash, after the rotation at the key's revision")
	wantResolve(t, s, h, want, acct)

	// A new key is at revision 0, and 0 conditions the rotation as any revision does.
	fresh := createKey(t, s, n, acct, "fresh", at(time.Minute))
	if _, err := s.RotateKey(ctx, fresh.ID, 0, newHash(), at(time.Hour)); err != nil {
		t.Errorf("RotateKey of a new key at revision 0: %v", err)
	}
	h2 := newHash()
	_, err = s.RotateKey(ctx, fresh.ID, 0, h2, at(2*time.Hour))
	wantErr(t, "RotateKey at revision 0 of a key rotated since", err, store.ErrConflict)
	wantUnresolved(t, s, h2, "hash given to the refused rotation")
	_, err = s.RotateKey(ctx, fresh.ID, auth.AnyRevision, h2, at(2*time.Hour))
	must(t, "RotateKey at any revision", err)
	wantRevision(t, s, fresh.ID, 2, "two rotations")
}

func ksRevokeKeyAtRevision(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	wide := widenKey(t, s, k)

	_, err := s.RevokeKey(ctx, k.ID, k.Revision, at(time.Hour))
	wantErr(t, "RevokeKey at the revision before an update", err, store.ErrConflict)
	wantKey(t, s, wide)
	wantRevision(t, s, k.ID, wide.Revision, "a refused RevokeKey")
	wantResolve(t, s, k.Hash, wide, acct)

	got, err := s.RevokeKey(ctx, k.ID, wide.Revision, at(time.Hour))
	must(t, "RevokeKey at the key's revision", err)
	want := wide
	want.RevokedAt = at(time.Hour)
	checkKey(t, "RevokeKey at the key's revision", got, want)
	wantRevision(t, s, k.ID, wide.Revision+1, "a revocation")

	_, err = s.RevokeKey(ctx, k.ID, wide.Revision, at(2*time.Hour))
	wantErr(t, "RevokeKey of a revoked key at the revision before its revocation", err, store.ErrConflict)
	again, err := s.RevokeKey(ctx, k.ID, got.Revision, at(3*time.Hour))
	must(t, "RevokeKey of a revoked key at its revision", err)
	checkKey(t, "RevokeKey of a revoked key at its revision", again, want)
	wantKey(t, s, want)
	wantRevision(t, s, k.ID, got.Revision, "revocations of a revoked key")

	// A new key is at revision 0, and 0 conditions the revocation as any revision does.
	fresh := createKey(t, s, n, acct, "fresh", at(time.Minute))
	widenKey(t, s, fresh)
	_, err = s.RevokeKey(ctx, fresh.ID, 0, at(time.Hour))
	wantErr(t, "RevokeKey at revision 0 of a key updated since", err, store.ErrConflict)
	_, err = s.RevokeKey(ctx, fresh.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey at any revision", err)
	wantRevision(t, s, fresh.ID, 2, "an update and a revocation")
}

func ksRevokeKey(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	wantResolve(t, s, k.Hash, k, acct) // as a caller would, before the revocation

	got, err := s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey", err)
	want := k
	want.RevokedAt = at(time.Hour)
	checkKey(t, "RevokeKey result", got, want)
	if !got.Revoked() {
		t.Errorf("RevokeKey returned a key whose Revoked() is false")
	}
	rk, _, err := s.Resolve(ctx, k.Hash)
	must(t, "Resolve of a revoked key", err)
	if !rk.Revoked() {
		t.Errorf("Resolve right after RevokeKey returned a key that is not revoked: RevokedAt %v", rk.RevokedAt)
	}
	wantResolve(t, s, k.Hash, want, acct)
	wantKey(t, s, want)
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary, want})
}

func ksRevokeTwice(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	_, err := s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(time.Hour))
	must(t, "RevokeKey", err)

	got, err := s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(2*time.Hour))
	if err != nil {
		t.Fatalf("second RevokeKey: %v, want no error", err)
	}
	want := k
	want.RevokedAt = at(time.Hour)
	checkKey(t, "second RevokeKey result", got, want)
	wantKey(t, s, want)
	wantResolve(t, s, k.Hash, want, acct)
}

func ksRevokeMissingKey(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	createAccount(t, s, n, "acct")
	_, err := s.RevokeKey(t.Context(), n.id("ghost"), auth.AnyRevision, at(time.Hour))
	wantErr(t, "RevokeKey of a missing key", err, store.ErrNotFound)
}

func ksErrorsNameTheID(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	missingAcct, missingKey := n.id("missing-acct"), n.id("missing-key")

	_, err := s.Account(ctx, missingAcct)
	wantNamed(t, "Account", err, store.ErrNotFound, missingAcct)
	_, err = s.Key(ctx, missingKey)
	wantNamed(t, "Key", err, store.ErrNotFound, missingKey)
	_, err = allKeys(ctx, s, missingAcct)
	wantNamed(t, "Keys", err, store.ErrNotFound, missingAcct)
	err = s.CreateKey(ctx, newKey(n, auth.Account{ID: missingAcct}, "orphan", t0), auth.KeyLimit{})
	wantNamed(t, "CreateKey for a missing account", err, store.ErrNotFound, missingAcct)
	_, err = s.RotateKey(ctx, missingKey, auth.AnyRevision, newHash(), t0)
	wantNamed(t, "RotateKey", err, store.ErrNotFound, missingKey)
	_, err = s.RevokeKey(ctx, missingKey, auth.AnyRevision, t0)
	wantNamed(t, "RevokeKey", err, store.ErrNotFound, missingKey)

	dup, dupKey := plainAccount(n, "acct")
	dupKey.ID = n.id("other-primary")
	err = s.CreateAccount(ctx, dup, dupKey)
	wantNamed(t, "CreateAccount with a taken account id", err, store.ErrConflict, acct.ID)
	other, otherKey := plainAccount(n, "other")
	otherKey.ID = primary.ID
	err = s.CreateAccount(ctx, other, otherKey)
	wantNamed(t, "CreateAccount with a taken key id", err, store.ErrConflict, primary.ID)
	k := newKey(n, acct, "k", t0)
	k.ID = primary.ID
	err = s.CreateKey(ctx, k, auth.KeyLimit{})
	wantNamed(t, "CreateKey with a taken key id", err, store.ErrConflict, primary.ID)
}

func ksNoAliasing(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := newAccount(t, n, "acct")
	k := newKey(n, acct, "ci", at(time.Minute))
	k.Restrictions = restrictions(t, auth.RestrictionSpec{APIs: []string{"echo"}, Channels: []string{"graphql"}})
	wantAcct, wantPrimary, wantK := acct, primary, k
	must(t, "CreateAccount", s.CreateAccount(ctx, acct, primary))
	must(t, "CreateKey", s.CreateKey(ctx, k, auth.KeyLimit{}))

	// Change the values that were passed in.
	acct.Plan, acct.CreatedAt = "changed", at(time.Hour)
	primary.Name, primary.Hash[0] = "changed", primary.Hash[0]^0xff
	k.Name, k.Primary, k.Restrictions = "changed", true, auth.Restrictions{}

	// Change the values that were returned.
	keys, err := allKeys(ctx, s, wantAcct.ID)
	must(t, "Keys", err)
	if len(keys) == 2 {
		keys[0].Name, keys[0].Hash[1] = "changed", keys[0].Hash[1]^0xff
		keys[1].RevokedAt = at(time.Hour)
		spec := keys[1].Restrictions.Spec()
		if len(spec.APIs) > 0 {
			spec.APIs[0] = "changed"
		}
		keys[0], keys[1] = keys[1], keys[0]
	}
	got, err := s.Key(ctx, wantK.ID)
	must(t, "Key", err)
	got.Name, got.Hash[2] = "changed", got.Hash[2]^0xff
	rk, ra, err := s.Resolve(ctx, wantPrimary.Hash)
	must(t, "Resolve", err)
	rk.Name, ra.Plan = "changed", "changed"
	ga, err := s.Account(ctx, wantAcct.ID)
	must(t, "Account", err)
	ga.Plan = "changed"
	if spec := ga.Restrictions.Spec(); len(spec.Channels) > 0 {
		spec.Channels[0] = "changed"
	}

	// Nothing stored has changed.
	ga, err = s.Account(ctx, wantAcct.ID)
	must(t, "Account", err)
	checkAccount(t, "Account after changing passed and returned values", ga, wantAcct)
	keys, err = allKeys(ctx, s, wantAcct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys after changing passed and returned values", keys, []auth.Key{wantPrimary, wantK})
	wantResolve(t, s, wantPrimary.Hash, wantPrimary, wantAcct)
	wantResolve(t, s, wantK.Hash, wantK, wantAcct)
	wantUnresolved(t, s, primary.Hash, "a changed copy of a stored hash")
}

func ksCanceledContext(t *testing.T, s auth.KeyStore) {
	ctx, n := canceled(t), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	newAcct, newPrimary := newAccount(t, n, "new")
	k := newKey(n, acct, "ci", at(time.Minute))
	h := newHash()

	wantErr(t, "CreateAccount", s.CreateAccount(ctx, newAcct, newPrimary), context.Canceled)
	_, err := s.Account(ctx, acct.ID)
	wantErr(t, "Account", err, context.Canceled)
	wantErr(t, "CreateKey", s.CreateKey(ctx, k, auth.KeyLimit{}), context.Canceled)
	_, err = s.Key(ctx, primary.ID)
	wantErr(t, "Key", err, context.Canceled)
	_, err = allKeys(ctx, s, acct.ID)
	wantErr(t, "Keys", err, context.Canceled)
	_, _, err = s.Resolve(ctx, primary.Hash)
	wantErr(t, "Resolve", err, context.Canceled)
	_, err = s.RotateKey(ctx, primary.ID, auth.AnyRevision, h, at(time.Hour))
	wantErr(t, "RotateKey", err, context.Canceled)
	_, err = s.RevokeKey(ctx, primary.ID, auth.AnyRevision, at(time.Hour))
	wantErr(t, "RevokeKey", err, context.Canceled)
	_, err = s.UpdateKey(ctx, auth.KeyUpdate{ID: primary.ID, Name: "changed"})
	wantErr(t, "UpdateKey", err, context.Canceled)

	wantNoAccount(t, s, newAcct.ID)
	wantNoKey(t, s, newPrimary.ID)
	wantNoKey(t, s, k.ID)
	wantUnresolved(t, s, h, "hash given to the canceled rotation")
	wantResolve(t, s, primary.Hash, primary, acct)
}

func ksConcurrentCreateDistinct(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	keys := make([]auth.Key, workers)
	accts := make([]auth.Account, workers)
	primaries := make([]auth.Key, workers)
	for i := range workers {
		keys[i] = newKey(n, acct, fmt.Sprintf("k%02d", i), t0)
		accts[i], primaries[i] = plainAccount(n, fmt.Sprintf("a%02d", i))
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if err := s.CreateKey(ctx, keys[i], auth.KeyLimit{}); err != nil {
				t.Errorf("CreateKey(%q): %v", keys[i].ID, err)
			}
			if err := s.CreateAccount(ctx, accts[i], primaries[i]); err != nil {
				t.Errorf("CreateAccount(%q): %v", accts[i].ID, err)
			}
		})
	}
	wg.Wait()

	got, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	wantIDs := append(keyIDs(keys), primary.ID)
	gotIDs := keyIDs(got)
	slices.Sort(wantIDs)
	slices.Sort(gotIDs)
	if !slices.Equal(gotIDs, wantIDs) {
		t.Errorf("Keys after concurrent CreateKey: got %d keys, want %d\ngot  %q\nwant %q", len(gotIDs), len(wantIDs), gotIDs, wantIDs)
	}
	for i := range workers {
		wantResolve(t, s, keys[i].Hash, keys[i], acct)
		wantResolve(t, s, primaries[i].Hash, primaries[i], accts[i])
	}
}

func ksConcurrentCreateSameKeyID(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	cands := make([]auth.Key, workers)
	for i := range cands {
		cands[i] = newKey(n, acct, "contested", t0)
		cands[i].Name = fmt.Sprintf("candidate-%02d", i)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { errs[i] = s.CreateKey(ctx, cands[i], auth.KeyLimit{}) })
	}
	wg.Wait()

	winner := oneWinner(t, "CreateKey", errs)
	if winner < 0 {
		return
	}
	wantKey(t, s, cands[winner])
	for i, c := range cands {
		if i != winner {
			wantUnresolved(t, s, c.Hash, fmt.Sprintf("hash of losing candidate %d", i))
		}
	}
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary, cands[winner]})
}

func ksConcurrentCreateSameAccountID(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	accts := make([]auth.Account, workers)
	keys := make([]auth.Key, workers)
	for i := range workers {
		accts[i], keys[i] = plainAccount(n, "contested")
		accts[i].Plan = fmt.Sprintf("plan-%02d", i)
		keys[i].ID = n.id(fmt.Sprintf("primary-%02d", i))
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { errs[i] = s.CreateAccount(ctx, accts[i], keys[i]) })
	}
	wg.Wait()

	winner := oneWinner(t, "CreateAccount", errs)
	if winner < 0 {
		return
	}
	got, err := s.Account(ctx, accts[winner].ID)
	must(t, "Account", err)
	checkAccount(t, "Account", got, accts[winner])
	ks, err := allKeys(ctx, s, accts[winner].ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", ks, []auth.Key{keys[winner]})
	for i := range workers {
		if i != winner {
			wantNoKey(t, s, keys[i].ID)
			wantUnresolved(t, s, keys[i].Hash, fmt.Sprintf("hash of losing candidate %d", i))
		}
	}
}

// oneWinner checks that exactly one of errs is nil and the others wrap
// store.ErrConflict, and returns the winner's index (-1 if there is none).
func oneWinner(t *testing.T, op string, errs []error) int {
	t.Helper()
	winner, wins := -1, 0
	for i, err := range errs {
		switch {
		case err == nil:
			winner = i
			wins++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("%s, candidate %d: got %v, want nil or an error wrapping store.ErrConflict", op, i, err)
		}
	}
	if wins != 1 {
		t.Errorf("%s from %d goroutines with one id: %d succeeded, want exactly 1", op, len(errs), wins)
		return -1
	}
	return winner
}

func ksConcurrentRotate(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	hashes := make([]auth.Hash, workers)
	for i := range hashes {
		hashes[i] = newHash()
	}
	when := func(i int) time.Time { return at(time.Hour + time.Duration(i)*time.Second) }
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, hashes[i], when(i)); err != nil {
				t.Errorf("RotateKey #%d: %v", i, err)
			}
		})
	}
	wg.Wait()

	wantUnresolved(t, s, k.Hash, "the original hash")
	live := -1
	for i, h := range hashes {
		_, _, err := s.Resolve(ctx, h)
		switch {
		case err == nil && live >= 0:
			t.Errorf("both hash %d and hash %d resolve after concurrent rotations", live, i)
		case err == nil:
			live = i
		default:
			wantErr(t, fmt.Sprintf("Resolve(hash %d)", i), err, store.ErrNotFound)
		}
	}
	if live < 0 {
		t.Fatalf("no hash resolves after %d concurrent rotations", workers)
	}
	want := k
	want.Hash, want.RotatedAt = hashes[live], when(live)
	wantKey(t, s, want)
}

func ksConcurrentRevoke(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	got := make([]auth.Key, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			var err error
			got[i], err = s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(time.Hour+time.Duration(i)*time.Second))
			if err != nil {
				t.Errorf("RevokeKey #%d: %v", i, err)
			}
		})
	}
	wg.Wait()

	stored, err := s.Key(ctx, k.ID)
	must(t, "Key", err)
	if !stored.Revoked() {
		t.Fatalf("key is not revoked after %d concurrent revocations", workers)
	}
	for i, g := range got {
		if !g.RevokedAt.Equal(stored.RevokedAt) {
			t.Errorf("RevokeKey #%d returned RevokedAt %v, but the key was revoked at %v", i, g.RevokedAt, stored.RevokedAt)
		}
	}
}

func ksRotatedAwayHashDead(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	const rotations, readers = 40, 8
	hashes := make([]auth.Hash, rotations+1)
	hashes[0] = k.Hash
	for i := 1; i <= rotations; i++ {
		hashes[i] = newHash()
	}

	// In each round, readers resolve the current hash (as callers do, and as would fill
	// a cache if the store had one) and hashes already rotated away, while the key is
	// rotated once more.
	var retired atomic.Int64 // hashes[:retired] have been rotated away
	for i := 1; i <= rotations; i++ {
		var wg sync.WaitGroup
		for r := range readers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(r), uint64(i)))
				for range 4 {
					m := retired.Load()
					s.Resolve(ctx, hashes[m])
					if m == 0 {
						continue
					}
					j := rng.IntN(int(m))
					if key, _, err := s.Resolve(ctx, hashes[j]); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("Resolve of hash %d, rotated away before the call began, returned key %q and error %v; want store.ErrNotFound", j, key.ID, err)
						return
					}
				}
			})
		}
		_, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, hashes[i], at(time.Duration(i)*time.Hour))
		if err == nil {
			retired.Store(int64(i))
		}
		wg.Wait()
		if err != nil {
			t.Fatalf("RotateKey #%d: %v", i, err)
		}
		if t.Failed() {
			return
		}
	}

	want := k
	want.Hash, want.RotatedAt = hashes[rotations], at(rotations*time.Hour)
	wantResolve(t, s, hashes[rotations], want, acct)
}

// wantRevision checks that the stored key has the given revision.
func wantRevision(t *testing.T, s auth.KeyStore, id string, want int64, after string) {
	t.Helper()
	k, err := s.Key(t.Context(), id)
	must(t, "Key", err)
	if k.Revision != want {
		t.Errorf("after %s: Revision %d, want %d", after, k.Revision, want)
	}
}

func ksUpdateKey(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	exp := at(time.Hour)
	narrowed := restrictions(t, auth.RestrictionSpec{APIs: []string{"echo"}, Channels: []string{"rest"},
		AllowedIPs: []string{"10.2.0.0/16"}, ExpiresAt: &exp})

	got, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: "ci-narrowed", Restrictions: narrowed, Revision: k.Revision})
	must(t, "UpdateKey", err)
	want := k
	want.Name, want.Restrictions = "ci-narrowed", narrowed
	checkKey(t, "UpdateKey result", got, want)
	if got.Revision <= k.Revision {
		t.Errorf("UpdateKey result: Revision %d, want more than %d", got.Revision, k.Revision)
	}
	wantKey(t, s, want)
	wantResolve(t, s, k.Hash, want, acct)
	keys, err := allKeys(ctx, s, acct.ID)
	must(t, "Keys", err)
	checkKeys(t, "Keys", keys, []auth.Key{primary, want})
	wantRevision(t, s, k.ID, got.Revision, "UpdateKey")

	// Restrictions can be cleared, and the primary key can be updated too.
	got2, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: "ci", Revision: got.Revision})
	must(t, "second UpdateKey", err)
	want.Name, want.Restrictions = "ci", auth.Restrictions{}
	checkKey(t, "second UpdateKey result", got2, want)
	p, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: primary.ID, Name: "main", Restrictions: primary.Restrictions, Revision: primary.Revision})
	must(t, "UpdateKey of the primary key", err)
	wantP := primary
	wantP.Name = "main"
	checkKey(t, "UpdateKey of the primary key", p, wantP)
	wantResolve(t, s, primary.Hash, wantP, acct)
}

func ksUpdateKeyStale(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	first, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: "first", Restrictions: k.Restrictions, Revision: k.Revision})
	must(t, "UpdateKey", err)
	_, err = s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: "stale", Revision: k.Revision})
	wantErr(t, "UpdateKey from the revision before the first update", err, store.ErrConflict)
	wantKey(t, s, first)
	wantRevision(t, s, k.ID, first.Revision, "a refused UpdateKey")

	rotated, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, newHash(), at(time.Hour))
	must(t, "RotateKey", err)
	_, err = s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: "stale", Revision: first.Revision})
	wantErr(t, "UpdateKey from the revision before a rotation", err, store.ErrConflict)
	wantKey(t, s, rotated)
}

func ksUpdateRevokedKey(t *testing.T, s auth.KeyStore) {
	_, k, revoked := createRevokedKey(t, s)
	_, err := s.UpdateKey(t.Context(), auth.KeyUpdate{ID: k.ID, Name: "revived", Revision: revoked.Revision})
	wantErr(t, "UpdateKey of a revoked key", err, store.ErrConflict)
	wantKey(t, s, revoked)
}

func ksUpdateMissingKey(t *testing.T, s auth.KeyStore) {
	n := newIDs()
	createAccount(t, s, n, "acct")
	_, err := s.UpdateKey(t.Context(), auth.KeyUpdate{ID: n.id("ghost"), Name: "ghost"})
	wantErr(t, "UpdateKey of a missing key", err, store.ErrNotFound)
}

func ksUpdateKeyBadName(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	for _, bad := range []string{"nul\x00name", "bad\xffutf8"} {
		_, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: bad, Revision: k.Revision})
		wantErr(t, fmt.Sprintf("UpdateKey with name %q", bad), err, store.ErrInvalid)
	}
	wantKey(t, s, k)
	wantRevision(t, s, k.ID, k.Revision, "refused UpdateKeys")
}

func ksRevisionCountsChanges(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, primary := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	wantRevision(t, s, primary.ID, 0, "CreateAccount")
	wantRevision(t, s, k.ID, 0, "CreateKey")
	last := int64(0)
	step := func(what string, got auth.Key, err error) {
		t.Helper()
		must(t, what, err)
		if got.Revision <= last {
			t.Errorf("%s: Revision %d, want more than %d", what, got.Revision, last)
		}
		last = got.Revision
		wantRevision(t, s, k.ID, last, what)
	}
	got, err := s.RotateKey(ctx, k.ID, auth.AnyRevision, newHash(), at(time.Hour))
	step("RotateKey", got, err)
	got, err = s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: "renamed", Revision: last})
	step("UpdateKey", got, err)
	got, err = s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(2*time.Hour))
	step("RevokeKey", got, err)
	got, err = s.RevokeKey(ctx, k.ID, auth.AnyRevision, at(3*time.Hour))
	must(t, "second RevokeKey", err)
	if got.Revision != last {
		t.Errorf("second RevokeKey: Revision %d, want %d (nothing changed)", got.Revision, last)
	}
	wantRevision(t, s, k.ID, last, "a second RevokeKey")
}

func ksConcurrentUpdate(t *testing.T, s auth.KeyStore) {
	ctx, n := t.Context(), newIDs()
	acct, _ := createAccount(t, s, n, "acct")
	k := createKey(t, s, n, acct, "ci", at(time.Minute))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = s.UpdateKey(ctx, auth.KeyUpdate{ID: k.ID, Name: fmt.Sprintf("w%02d", i), Revision: k.Revision})
		})
	}
	wg.Wait()
	w := oneWinner(t, "UpdateKey", errs)
	if w >= 0 {
		got, err := s.Key(ctx, k.ID)
		must(t, "Key", err)
		if want := fmt.Sprintf("w%02d", w); got.Name != want {
			t.Errorf("after concurrent updates, Name %q, want the winner's %q", got.Name, want)
		}
	}
}
