package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
)

// TestDeletedAccountSession checks a session token that acts for the whole account (one
// from Sessions.Issue) on instances whose key caches hold the account, after an
// operator deleted the account from the store (its rows in PostgreSQL; its record in
// Redis, <prefix>:{<account>}:acct): the very next call is refused with 401 on every
// instance, a paid call and the analytics alike, and is not charged; the next one
// too, and another account's token still works.
func TestDeletedAccountSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stores returns the stores and a function that deletes an account from them.
		stores func(t *testing.T) (tollgate.Stores, auth.SessionStore, func(ctx context.Context, account string) error)
	}{
		{"postgres", func(t *testing.T) (tollgate.Stores, auth.SessionStore, func(context.Context, string) error) {
			stores, ended, pool := onPostgres(t)
			return stores, ended, func(ctx context.Context, account string) error {
				_, err := pool.Exec(ctx, `DELETE FROM tollgate_keys WHERE account_id = $1`, account)
				if err == nil {
					_, err = pool.Exec(ctx, `DELETE FROM tollgate_accounts WHERE id = $1`, account)
				}
				return err
			}
		}},
		{"redis", func(t *testing.T) (tollgate.Stores, auth.SessionStore, func(context.Context, string) error) {
			stores, ended, c, prefix := onRedis(t)
			return stores, ended, func(ctx context.Context, account string) error {
				return c.Del(ctx, prefix+":{"+account+"}:acct").Err()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				stores tollgate.Stores
				drop   func(context.Context, string) error
			)
			b := backend{tc.name, func(t *testing.T) (tollgate.Stores, auth.SessionStore) {
				var ended auth.SessionStore
				stores, ended, drop = tc.stores(t)
				return stores, ended
			}}
			d := deploy(t, b, nil, true, true)
			d.account("gone")
			d.account("kept")
			token := func(account string) string {
				signer, _ := d.instances[0].svc.Sessions()
				tok, err := signer.Issue(account, d.clock.now(), 2*time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			gone, kept := token("gone"), token("kept")
			for i := range d.instances { // the second call of each is served from the cache
				for range 2 {
					d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", gone), 200, `"api":"alpha"`)
					d.want(d.do(i, "GET", "/v1/analytics", "", "X-Jwt", gone), 200, `"account":"gone"`)
				}
			}
			before, err := d.instances[0].mgr.Account(t.Context(), "gone")
			if err != nil {
				t.Fatal(err)
			}

			if err := drop(t.Context(), "gone"); err != nil {
				t.Fatal(err)
			}
			for i := range d.instances {
				for range 2 {
					d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", gone), 401, "its account does not exist")
					d.want(d.do(i, "GET", "/v1/analytics", "", "X-Jwt", gone), 401, "its account does not exist")
				}
				d.want(d.do(i, "GET", "/v1/alpha", "", "X-Jwt", kept), 200, `"api":"alpha"`)
			}
			after, err := stores.Ledger.Balance(t.Context(), "gone", d.clock.now(), before.Balance.Period, before.Balance.Allowance)
			if err != nil || after.Remaining != before.Balance.Remaining || after.Used != before.Balance.Used {
				t.Errorf("balance of the deleted account %+v (%v), want it unchanged %+v: the refused calls are not charged", after, err, before.Balance)
			}
		})
	}
}
