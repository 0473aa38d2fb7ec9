package authn_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/internal/authn"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// newCachedAuthority returns an Authority with a key cache over a memory key store.
func newCachedAuthority(t *testing.T, sessions *auth.Sessions) (*authn.Authority, *authn.KeyCache, *memory.KeyStore) {
	t.Helper()
	ks, cache := memory.NewKeyStore(), authn.NewKeyCache(nil)
	a, err := authn.New(ks, &authn.Options{Sessions: sessions, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return a, cache, ks
}

// TestKeyCacheForgetsChangedKeys checks that a key rotated, revoked or updated, and
// then forgotten (Authority.Forget, which the service calls on the key events of its
// own bus when package accounts changes a key), leaves the in-process cache at once: the
// next authentication reads the store and gets the key's new verdict, not the cached
// record (which admission would still refuse, one step later). A key changed elsewhere
// (another instance), and not forgotten here, stays cached, marked Cached, for the
// caller to check.
func TestKeyCacheForgetsChangedKeys(t *testing.T) {
	r := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}})
	tests := []struct {
		name string
		// change changes the key in the store and returns the new value that
		// authenticates it ("" for none).
		change func(t *testing.T, ks *memory.KeyStore, key auth.Key) string
		// check judges the authentication of the old value after the change.
		check func(t *testing.T, p auth.Principal, err error)
		// forgotten is whether the authority is told to forget the key after the
		// change, which empties the cache.
		forgotten bool
	}{
		{"rotated", func(t *testing.T, ks *memory.KeyStore, key auth.Key) string {
			_, value := rotate(t, ks, key.ID, t0.Add(time.Minute))
			return value
		}, func(t *testing.T, p auth.Principal, err error) {
			if !errors.Is(err, auth.ErrUnknownKey) {
				t.Errorf("the old value after a rotation: %+v, %v; want ErrUnknownKey from the store", p, err)
			}
		}, true},
		{"revoked", func(t *testing.T, ks *memory.KeyStore, key auth.Key) string {
			revoke(t, ks, key.ID, t0.Add(time.Minute))
			return ""
		}, func(t *testing.T, p auth.Principal, err error) {
			if p.Cached {
				t.Errorf("a revoked key authenticated from the cache: %+v", p)
			}
			wantDenied(t, err, auth.ErrKeyRevoked, "revoked")
		}, true},
		{"updated", func(t *testing.T, ks *memory.KeyStore, key auth.Key) string {
			if _, err := ks.UpdateKey(t.Context(), auth.KeyUpdate{ID: key.ID, Name: key.Name, Restrictions: r, Revision: key.Revision}); err != nil {
				t.Fatal(err)
			}
			return "" // the value is unchanged: the check reads it
		}, func(t *testing.T, p auth.Principal, err error) {
			if err != nil || p.Cached || p.Key.Restrictions.AllowsAPI("geo") {
				t.Errorf("an updated key: %+v, %v; want its new restrictions read from the store", p, err)
			}
		}, true},
		{"rotated on another instance", func(t *testing.T, ks *memory.KeyStore, key auth.Key) string {
			rotate(t, ks, key.ID, t0.Add(time.Minute))
			return ""
		}, func(t *testing.T, p auth.Principal, err error) {
			if err != nil || !p.Cached {
				t.Errorf("a key changed behind the cache: %+v, %v; want the cached record, marked Cached", p, err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, cache, ks := newCachedAuthority(t, nil)
			ctx := t.Context()
			acct, _, _ := seedAccount(t, ks, auth.Account{ID: "acct_1"})
			key, value := seedKey(t, ks, acct.ID, "ci", auth.Restrictions{})
			if p, err := a.Authenticate(ctx, apiKey(value), t0); err != nil || p.Cached {
				t.Fatalf("first authentication: %+v, %v; want it read from the store", p, err)
			}
			if p, err := a.Authenticate(ctx, apiKey(value), t0); err != nil || !p.Cached || cache.Len() != 1 {
				t.Fatalf("second authentication: %+v, %v, %d cached; want the cached record", p, err, cache.Len())
			}

			now := t0.Add(time.Minute)
			current := tt.change(t, ks, key)
			if tt.forgotten {
				a.Forget(key.ID)
			}
			if got, want := cache.Len(), map[bool]int{true: 0, false: 1}[tt.forgotten]; got != want {
				t.Errorf("%d records cached after the change, want %d", got, want)
			}
			p, err := a.Authenticate(ctx, apiKey(value), now)
			tt.check(t, p, err)
			if current == "" {
				return
			}
			// The key's current value is read from the store once, then cached again.
			for i, cached := range []bool{false, true} {
				p, err := a.Authenticate(ctx, apiKey(current), now)
				if err != nil || p.Key.ID != key.ID || p.Cached != cached {
					t.Errorf("authentication %d of the current value: %+v, %v; want key %s, Cached %v", i+1, p, err, key.ID, cached)
				}
			}
		})
	}
}

// TestKeyCacheForgetsByID checks the same for callers bound to a key's id (OAuth
// grants): after a rotation that the authority is told to forget they read the rotated
// record from the store, and after a revocation they are refused by the store's
// verdict.
func TestKeyCacheForgetsByID(t *testing.T) {
	a, cache, ks := newCachedAuthority(t, nil)
	ctx := t.Context()
	_, key, _ := seedAccount(t, ks, auth.Account{ID: "acct_1"})
	for i, cached := range []bool{false, true} {
		if p, err := a.AuthenticateKeyID(ctx, key.ID, t0); err != nil || p.Cached != cached || !p.ByID {
			t.Fatalf("authentication %d by id: %+v, %v; want Cached %v", i+1, p, err, cached)
		}
	}
	rotated, _ := rotate(t, ks, key.ID, t0.Add(time.Minute))
	a.Forget(key.ID)
	if cache.Len() != 0 {
		t.Errorf("%d records cached after the rotation, want 0", cache.Len())
	}
	p, err := a.AuthenticateKeyID(ctx, key.ID, t0.Add(time.Minute))
	if err != nil || p.Cached || p.Key.Hash != rotated.Hash {
		t.Errorf("by id after the rotation: %+v, %v; want the rotated record from the store", p, err)
	}
	revoke(t, ks, key.ID, t0.Add(2*time.Minute))
	a.Forget(key.ID)
	if cache.Len() != 0 {
		t.Errorf("%d records cached after the revocation, want 0", cache.Len())
	}
	p, err = a.AuthenticateKeyID(ctx, key.ID, t0.Add(2*time.Minute))
	if p.Cached {
		t.Errorf("a revoked key authenticated by id from the cache: %+v", p)
	}
	wantDenied(t, err, auth.ErrKeyRevoked, "revoked")
}
