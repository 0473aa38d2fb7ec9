package accounts_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// keyCaller is a self-service caller with the given key value, from addr.
func keyCaller(value string, addr netip.Addr) tollgate.Caller {
	return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: value}, Addr: addr}
}

// TestSelfServiceRules checks who may do what through the self-service methods, with
// sub-keys allowed to manage keys and without.
func TestSelfServiceRules(t *testing.T) {
	ctx := context.Background()
	addr := netip.MustParseAddr("192.0.2.10")
	for _, subKeysManage := range []bool{false, true} {
		log := memory.NewAuditStore()
		h := newHarness(t, harnessOptions{audit: log, accounts: accounts.Options{SubKeysManageKeys: subKeysManage}})
		primary := keyCaller(h.key, addr)
		okOnly := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"ok"}})
		sub, subValue, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "ci", Restrictions: okOnly})
		if err != nil {
			t.Fatal(err)
		}
		wide, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "wide"})
		if err != nil {
			t.Fatal(err)
		}
		narrow, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "narrow", Restrictions: okOnly})
		if err != nil {
			t.Fatal(err)
		}
		info, err := h.mgr.OwnAccount(ctx, primary)
		if err != nil || len(info.Keys) != 4 {
			t.Fatalf("OwnAccount of the primary key: %d keys, %v; want 4", len(info.Keys), err)
		}
		primaryID := info.Keys[0].ID
		_, _, otherValue, err := h.mgr.CreateAccount(ctx, accounts.Spec{ID: "other", Plan: "p"})
		if err != nil {
			t.Fatal(err)
		}
		subCaller := keyCaller(subValue, addr)
		// A sub-key managing: refused without the option; with it, only keys no wider.
		manage := func(want tollgate.Code) tollgate.Code {
			if subKeysManage {
				return want
			}
			return tollgate.CodeForbidden
		}
		sameRestrictions := okOnly
		for _, tc := range []struct {
			name string
			do   func() error
			want tollgate.Code
		}{
			{"sub-key creates a key within itself", func() error {
				_, _, err := h.mgr.CreateOwnKey(ctx, subCaller, accounts.NewKey{Name: "x", Restrictions: sameRestrictions})
				return err
			}, manage(success)},
			{"sub-key creates a wider key", func() error {
				_, _, err := h.mgr.CreateOwnKey(ctx, subCaller, accounts.NewKey{Name: "x"})
				return err
			}, tollgate.CodeForbidden},
			{"sub-key rotates a wider key", func() error { _, _, err := h.mgr.RotateOwnKey(ctx, subCaller, wide.ID); return err }, tollgate.CodeForbidden},
			{"sub-key revokes the primary key", func() error { _, err := h.mgr.RevokeOwnKey(ctx, subCaller, primaryID); return err }, tollgate.CodeForbidden},
			{"sub-key rotates a key as narrow", func() error { _, _, err := h.mgr.RotateOwnKey(ctx, subCaller, narrow.ID); return err }, manage(success)},
			{"sub-key reads the audit log", func() error { _, err := h.mgr.OwnAuditLog(ctx, subCaller, audit.Query{}); return err }, tollgate.CodeForbidden}, // the log tells of every key
			{"sub-key reads its account", func() error { _, err := h.mgr.OwnAccount(ctx, subCaller); return err }, success},
			{"primary revokes the primary key", func() error { _, err := h.mgr.RevokeOwnKey(ctx, primary, primaryID); return err }, tollgate.CodeForbidden},
			{"primary changes the primary key", func() error {
				name := "renamed"
				_, err := h.mgr.UpdateOwnKey(ctx, primary, primaryID, accounts.KeyChange{Name: &name})
				return err
			}, tollgate.CodeForbidden},
			{"primary widens a key", func() error {
				_, err := h.mgr.UpdateOwnKey(ctx, primary, narrow.ID, accounts.KeyChange{Restrictions: &auth.Restrictions{}})
				return err
			}, tollgate.CodeForbidden},
			{"primary revokes another account's key", func() error {
				info, err := h.mgr.OwnAccount(ctx, keyCaller(otherValue, addr))
				if err != nil {
					return err
				}
				_, err = h.mgr.RevokeOwnKey(ctx, primary, info.Keys[0].ID)
				return err
			}, tollgate.CodeNotFound},
			{"primary revokes a key that does not exist", func() error { _, err := h.mgr.RevokeOwnKey(ctx, primary, "key_nope"); return err }, tollgate.CodeNotFound},
			{"primary names a key id with a NUL", func() error { _, err := h.mgr.RevokeOwnKey(ctx, primary, "key\x00"); return err }, tollgate.CodeInvalidInput},
			{"primary picks a key value", func() error {
				_, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "x", Value: auth.NewKeyValue()})
				return err
			}, tollgate.CodeInvalidInput},
			{"unknown key value", func() error {
				_, err := h.mgr.OwnKeys(ctx, keyCaller(auth.NewKeyValue(), addr), auth.KeyQuery{})
				return err
			}, tollgate.CodeUnauthorized},
			{"primary narrows a key", func() error {
				_, err := h.mgr.UpdateOwnKey(ctx, primary, wide.ID, accounts.KeyChange{Restrictions: &okOnly})
				return err
			}, success},
			{"primary revokes a sub-key", func() error { _, err := h.mgr.RevokeOwnKey(ctx, primary, sub.ID); return err }, success},
			{"the revoked sub-key reads its account", func() error { _, err := h.mgr.OwnAccount(ctx, subCaller); return err }, tollgate.CodeForbidden},
		} {
			err := tc.do()
			got := success
			if err != nil {
				got = tollgate.CodeOf(err)
				if strings.TrimSpace(err.Error()) == "" {
					t.Errorf("sub-keys manage %v: %s: a refusal without a message", subKeysManage, tc.name)
				}
			}
			if got != tc.want {
				t.Errorf("sub-keys manage %v: %s: %v (%v), want %v", subKeysManage, tc.name, got, err, tc.want)
			}
		}
		// The widening refusal names the field.
		_, err = h.mgr.UpdateOwnKey(ctx, primary, narrow.ID, accounts.KeyChange{Restrictions: &auth.Restrictions{}})
		if err == nil || !strings.Contains(err.Error(), "apis") {
			t.Errorf("widening refusal %v does not name apis", err)
		}
		// Every change is recorded with the acting key and the address.
		page, err := h.mgr.AuditLog(ctx, audit.Query{Account: "acct"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			if e.Action == audit.AccountCreate {
				continue
			}
			if e.Addr != addr || (e.Actor != primaryID && e.Actor != sub.ID) {
				t.Errorf("entry %s of %s: actor %q from %v, want a key of the account from %v", e.Action, e.Target, e.Actor, e.Addr, addr)
			}
		}
	}
}

// TestSelfServiceIgnoresChannelsButNotAddresses checks that a key's channel list does
// not bar self-service, and its IP allow-list does.
func TestSelfServiceIgnoresChannelsButNotAddresses(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	inside := netip.MustParseAddr("10.0.0.1")
	r := mustRestrictions(t, auth.RestrictionSpec{Channels: []string{"mcp"}, AllowedIPs: []string{"10.0.0.0/8"}})
	_, value, err := h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: "mcp-only", Restrictions: r})
	if err != nil {
		t.Fatal(err)
	}
	c := keyCaller(value, inside)
	c.Channel = auth.ChannelREST // a front door naming a channel does not change the rule
	if _, err := h.mgr.OwnKeys(ctx, c, auth.KeyQuery{}); err != nil {
		t.Errorf("an MCP-only key from an allowed address: %v, want access", err)
	}
	if _, err := h.mgr.OwnKeys(ctx, keyCaller(value, netip.MustParseAddr("192.0.2.1")), auth.KeyQuery{}); tollgate.CodeOf(err) != tollgate.CodeForbidden {
		t.Errorf("from an address outside the allow-list: %v, want forbidden", err)
	}
}

// racingKeyStore is a memory key store where another writer updates a key (renaming it
// to its own name) right after each of the next races reads of it: each update decided
// on that read then conflicts, as with concurrent updates of one key.
type racingKeyStore struct {
	*memory.KeyStore
	races atomic.Int32
}

func (s *racingKeyStore) Key(ctx context.Context, id string) (auth.Key, error) {
	k, err := s.KeyStore.Key(ctx, id)
	if err == nil && s.races.Add(-1) >= 0 {
		if _, err := s.KeyStore.UpdateKey(ctx, auth.KeyUpdate{ID: id, Name: k.Name, Restrictions: k.Restrictions, Revision: k.Revision}); err != nil {
			return auth.Key{}, err
		}
	}
	return k, err
}

// TestUpdateKeyConflicts checks that an update of a key that other updates change
// meanwhile is tried again on the key as it is now, and succeeds unless it loses every
// attempt; then, and for a revoked key, the conflict says what to do in the caller's
// terms, with none of the store's internals.
func TestUpdateKeyConflicts(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		races   int32
		revoked bool
		want    string // "" for success
	}{
		{"no concurrent update", 0, false, ""},
		{"a few concurrent updates", 5, false, ""},
		{"concurrent updates on every attempt", 1000, false, "the key changed while it was being updated; read it again and retry"},
		{"a revoked key", 0, true, "is revoked; a revoked key cannot be changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := &racingKeyStore{KeyStore: memory.NewKeyStore()}
			h := newHarness(t, harnessOptions{keys: keys})
			primary := keyCaller(h.key, netip.Addr{})
			k, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "ci"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.revoked {
				if _, err := h.mgr.RevokeKey(ctx, k.ID); err != nil {
					t.Fatal(err)
				}
			}
			name := "renamed"
			for _, update := range []func() error{
				func() error { _, err := h.mgr.UpdateKey(ctx, k.ID, accounts.KeyChange{Name: &name}); return err },
				func() error {
					_, err := h.mgr.UpdateOwnKey(ctx, primary, k.ID, accounts.KeyChange{Name: &name})
					return err
				},
			} {
				keys.races.Store(tc.races)
				err := update()
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("update: %v", err)
				case tc.want != "" && (tollgate.CodeOf(err) != tollgate.CodeConflict || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("update: %v; want a conflict saying %q", err, tc.want)
				case err != nil && strings.ContainsAny(err.Error(), "():") || strings.Contains(fmt.Sprint(err), "memory"):
					t.Errorf("the conflict shows the store's internals: %q", err)
				}
			}
		})
	}
}

// TestRevokeTwiceRecordsOnce checks that revoking a revoked key, by the operator or
// through self-service, succeeds without a second key.revoke entry in the audit log.
func TestRevokeTwiceRecordsOnce(t *testing.T) {
	ctx := context.Background()
	log := memory.NewAuditStore()
	h := newHarness(t, harnessOptions{audit: log})
	primary := keyCaller(h.key, netip.Addr{})
	k, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	for _, revoke := range []struct {
		name string
		do   func() (auth.Key, error)
	}{
		{"self-service", func() (auth.Key, error) { return h.mgr.RevokeOwnKey(ctx, primary, k.ID) }},
		{"self-service again", func() (auth.Key, error) { return h.mgr.RevokeOwnKey(ctx, primary, k.ID) }},
		{"operator", func() (auth.Key, error) { return h.mgr.RevokeKey(ctx, k.ID) }},
	} {
		if got, err := revoke.do(); err != nil || !got.Revoked() {
			t.Errorf("%s revocation: %+v, %v; want the revoked key", revoke.name, got, err)
		}
	}
	page, err := h.mgr.AuditLog(ctx, audit.Query{Account: "acct"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range page.Entries {
		if e.Action == audit.KeyRevoke {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d key.revoke entries for one key revoked three times; want 1", n)
	}
}

// wideningKeyStore is a memory key store where another writer widens a key (lifting
// all its restrictions) right after the next read of it, once armed: a change decided
// on that read was judged on a key narrower than the one it would apply to.
type wideningKeyStore struct {
	*memory.KeyStore
	target atomic.Pointer[string]
}

func (s *wideningKeyStore) Key(ctx context.Context, id string) (auth.Key, error) {
	k, err := s.KeyStore.Key(ctx, id)
	if t := s.target.Load(); err == nil && t != nil && *t == id && s.target.CompareAndSwap(t, nil) {
		if _, err := s.KeyStore.UpdateKey(ctx, auth.KeyUpdate{ID: id, Name: k.Name, Revision: k.Revision}); err != nil {
			return auth.Key{}, err
		}
	}
	return k, err
}

// TestSubKeyChangeOfWidenedKey checks that a sub-key's rotation or revocation of a key
// it may manage is refused, and changes nothing, when the key is widened between the
// reading the rule is judged on and the change: a sub-key never obtains the value of
// (nor revokes) a key wider than itself. Without the race, the same calls succeed.
func TestSubKeyChangeOfWidenedKey(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		widen  bool
		change func(h *harness, c tollgate.Caller, id string) (string, error)
	}{
		{"rotate", false, rotateOwn},
		{"rotate of a widened key", true, rotateOwn},
		{"revoke", false, revokeOwn},
		{"revoke of a widened key", true, revokeOwn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := &wideningKeyStore{KeyStore: memory.NewKeyStore()}
			h := newHarness(t, harnessOptions{keys: keys, accounts: accounts.Options{SubKeysManageKeys: true}})
			primary := keyCaller(h.key, netip.Addr{})
			okOnly := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"ok"}})
			_, subValue, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "ci", Restrictions: okOnly})
			if err != nil {
				t.Fatal(err)
			}
			target, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "narrow", Restrictions: okOnly})
			if err != nil {
				t.Fatal(err)
			}
			if tc.widen {
				keys.target.Store(&target.ID)
			}
			value, err := tc.change(h, keyCaller(subValue, netip.Addr{}), target.ID)
			after, kerr := keys.KeyStore.Key(ctx, target.ID)
			if kerr != nil {
				t.Fatal(kerr)
			}
			if !tc.widen {
				if err != nil {
					t.Fatalf("%s of a key no wider than the caller's: %v", tc.name, err)
				}
				if after.Hash == target.Hash && !after.Revoked() {
					t.Errorf("%s succeeded but the key is unchanged", tc.name)
				}
				return
			}
			const want = "the key changed while you were changing it; read it again and retry"
			if tollgate.CodeOf(err) != tollgate.CodeConflict || err.Error() != want {
				t.Errorf("%s: %v (code %v); want a conflict saying %q", tc.name, err, tollgate.CodeOf(err), want)
			}
			if value != "" {
				t.Errorf("%s of a widened key returned a key value", tc.name)
			}
			if after.Restrictions.WithinOf(target.Restrictions, "the key") == nil || after.Hash != target.Hash || after.Revoked() || after.Revision != target.Revision+1 {
				t.Errorf("%s was refused, yet the widened key changed: %+v; want it widened only (hash %v, revision %d)", tc.name, after, target.Hash, target.Revision+1)
			}
		})
	}
}

func rotateOwn(h *harness, c tollgate.Caller, id string) (string, error) {
	_, value, err := h.mgr.RotateOwnKey(context.Background(), c, id)
	return value, err
}

func revokeOwn(h *harness, c tollgate.Caller, id string) (string, error) {
	_, err := h.mgr.RevokeOwnKey(context.Background(), c, id)
	return "", err
}
