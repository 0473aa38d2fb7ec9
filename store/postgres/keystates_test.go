package postgres_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// TestKeyStatesAgree holds tollgate_key_states (the key checks sent alone: CheckKey, a
// step that checks a key and nothing else) to the states tollgate_key_state gives the
// same checks (a key checked within an admission), case by case and as one batch: a
// live, revoked and rotated key, revisions of the key and of its account current and
// stale, another account's key, unknown ids, session checks, malformed or missing
// hashes, no account.
func TestKeyStatesAgree(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, 4)
	setup := []string{
		`INSERT INTO tollgate_accounts (id, plan, created_at) VALUES ('acme', 'pro', now()), ('other', 'pro', now())`,
		`INSERT INTO tollgate_keys (id, account_id, name, is_primary, hash, created_at) VALUES
			('live', 'acme', 'a', true, sha256('live'), now()),
			('revoked', 'acme', 'b', false, sha256('revoked'), now()),
			('rotated', 'acme', 'c', false, sha256('rotated'), now()),
			('theirs', 'other', 'd', true, sha256('theirs'), now())`,
		`UPDATE tollgate_keys SET revoked_at = now(), revision = revision + 2 WHERE id = 'revoked'`,
		`UPDATE tollgate_keys SET hash = sha256('rotated again'), revision = revision + 1 WHERE id = 'rotated'`,
		`UPDATE tollgate_accounts SET plan = 'team', revision = revision + 3 WHERE id = 'other'`,
	}
	for _, q := range setup {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rev := func(table, id string) int64 {
		var r int64
		if err := pool.QueryRow(ctx, `SELECT revision FROM `+table+` WHERE id = $1`, id).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	sum := func(s string) []byte {
		var h []byte
		if err := pool.QueryRow(ctx, `SELECT sha256($1::bytea)`, []byte(s)).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	// hash is a check's p_hash: the key's hash, then the revisions given (0 to 2).
	hash := func(h []byte, revs ...int64) []byte {
		out := slices.Clone(h)
		for _, r := range revs {
			out = binary.BigEndian.AppendUint64(out, uint64(r))
		}
		return out
	}
	acme, other := rev("tollgate_accounts", "acme"), rev("tollgate_accounts", "other")
	live, revoked, rotated := rev("tollgate_keys", "live"), rev("tollgate_keys", "revoked"), rev("tollgate_keys", "rotated")
	theirs := rev("tollgate_keys", "theirs")
	if rotated == 0 || other == 0 {
		t.Fatalf("the rotation and the account's change left revisions %d and %d: the cases below need them changed", rotated, other)
	}

	cases := []struct {
		name    string
		account string
		id      string
		hash    []byte
		want    int
	}{
		{"live, hash alone", "acme", "live", hash(sum("live")), 0},
		{"live, its revision", "acme", "live", hash(sum("live"), live), 0},
		{"live, both revisions", "acme", "live", hash(sum("live"), live, acme), 0},
		{"live, a stale key revision", "acme", "live", hash(sum("live"), live+1, acme), 1},
		{"live, a stale account revision", "acme", "live", hash(sum("live"), live, acme+1), 1},
		{"live, another hash", "acme", "live", hash(sum("not it"), live, acme), 1},
		{"live, checked as another account's", "other", "live", hash(sum("live"), live, other), 1},
		{"revoked", "acme", "revoked", hash(sum("revoked"), revoked, acme), 2},
		{"revoked, a stale revision", "acme", "revoked", hash(sum("revoked"), revoked+5, acme), 2},
		{"rotated, the old hash", "acme", "rotated", hash(sum("rotated"), 0, acme), 1},
		{"rotated, the new hash", "acme", "rotated", hash(sum("rotated again"), rotated, acme), 0},
		{"rotated, the new hash, the old revision", "acme", "rotated", hash(sum("rotated again"), 0, acme), 1},
		{"another account's key", "other", "theirs", hash(sum("theirs"), theirs, other), 0},
		{"another account's key, a stale account revision", "other", "theirs", hash(sum("theirs"), theirs, 0), 1},
		{"unknown id", "acme", "nobody", hash(sum("nobody"), 0, acme), 1},
		{"unknown account", "ghost", "live", hash(sum("live"), live, 0), 1},
		{"session", "acme", "", hash(make([]byte, 32), 0, acme), 0},
		{"session, no revision", "acme", "", hash(make([]byte, 32)), 0},
		{"session, a stale account revision", "other", "", hash(make([]byte, 32), 0, other-1), 1},
		{"session, unknown account", "ghost", "", hash(make([]byte, 32), 0, 0), 1},
		{"a short hash", "acme", "live", sum("live")[:31], 1},
		{"a long hash", "acme", "live", append(hash(sum("live"), live, acme), 0), 1},
		{"an empty hash", "acme", "live", []byte{}, 1},
		{"no hash", "acme", "live", nil, 1},
		{"no hash, revoked", "acme", "revoked", nil, 1},
		{"session, no hash", "acme", "", nil, 1},
		{"session, a short hash", "acme", "", make([]byte, 31), 1},
	}
	// The account is a string, or nil for a NULL one.
	keyState := func(account any, id string, h []byte) int {
		var st int
		if err := pool.QueryRow(ctx, `SELECT tollgate_key_state($1, $2, $3)`, account, id, h).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	keyStates := func(account any, ids []string, hs [][]byte) []int {
		rows, err := pool.Query(ctx, `SELECT k.i, k.state FROM tollgate_key_states($1, $2::text[], $3::bytea[]) k`, account, ids, hs)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var states []int
		for rows.Next() {
			var i int64
			var st int
			if err := rows.Scan(&i, &st); err != nil {
				t.Fatal(err)
			}
			if i != int64(len(states)+1) {
				t.Fatalf("tollgate_key_states answered row %d in place %d", i, len(states)+1)
			}
			states = append(states, st)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return states
	}
	byAccount := map[string][]int{} // the cases of each account, for the batches
	for i, c := range cases {
		one, set := keyState(c.account, c.id, c.hash), keyStates(c.account, []string{c.id}, [][]byte{c.hash})
		if one != c.want || len(set) != 1 || set[0] != c.want {
			t.Errorf("%s: tollgate_key_state %d, tollgate_key_states %v, want %d", c.name, one, set, c.want)
		}
		byAccount[c.account] = append(byAccount[c.account], i)
	}
	for account, at := range byAccount {
		// Each account's cases in one batch, twice over in reverse, so that a batch holds
		// repeated ids and its answers must follow its order.
		var ids []string
		var hs [][]byte
		var want []int
		for _, i := range append(slices.Clone(at), reversed(at)...) {
			ids, hs, want = append(ids, cases[i].id), append(hs, cases[i].hash), append(want, cases[i].want)
		}
		if got := keyStates(account, ids, hs); !slices.Equal(got, want) {
			t.Errorf("account %q, a batch of %d checks: %v, want %v", account, len(ids), got, want)
		}
	}
	// A check without an account (NULL) is unknown, whatever the key.
	for _, c := range cases[:3] {
		one, set := keyState(nil, c.id, c.hash), keyStates(nil, []string{c.id}, [][]byte{c.hash})
		if one != 1 || !slices.Equal(set, []int{1}) {
			t.Errorf("%s, no account: tollgate_key_state %d, tollgate_key_states %v, want 1", c.name, one, set)
		}
	}
	if got := keyStates("acme", nil, nil); len(got) != 0 {
		t.Errorf("no checks: %v", got)
	}
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestCheckKeyBesideSteps sends key checks (CheckKey) of one account concurrently with
// its admission steps, so that they share statements (a check is a step that checks
// the key and nothing else), with and without batching: each check answers its own
// key's state, live, revoked or unknown.
func TestCheckKeyBesideSteps(t *testing.T) {
	for _, batch := range []int{0, 1} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t, &postgres.Options{Batch: batch})
			now := time.Now()
			live := auth.Key{ID: "live", AccountID: "acme", Name: "primary", Primary: true, Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: now}
			revoked := auth.Key{ID: "revoked", AccountID: "acme", Name: "old", Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: now}
			if err := s.CreateAccount(ctx, auth.Account{ID: "acme", Plan: "pro", CreatedAt: now}, live); err != nil {
				t.Fatal(err)
			}
			if err := s.CreateKey(ctx, revoked, auth.KeyLimit{}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RevokeKey(ctx, revoked.ID, auth.AnyRevision, now); err != nil {
				t.Fatal(err)
			}
			checks := []struct {
				check driver.KeyCheck
				want  driver.KeyState
			}{
				{driver.KeyCheck{Account: "acme", KeyID: live.ID, Hash: live.Hash}, driver.KeyLive},
				{driver.KeyCheck{Account: "acme", KeyID: revoked.ID, Hash: revoked.Hash}, driver.KeyRevoked},
				{driver.KeyCheck{Account: "acme", KeyID: "nobody", Hash: live.Hash}, driver.KeyUnknown},
				{driver.KeyCheck{Account: "acme", KeyID: live.ID, Hash: revoked.Hash}, driver.KeyUnknown},
			}
			limit := billing.Limit{Rate: 1_000_000, Per: time.Minute, Burst: 1_000_000}
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Go(func() {
					if i%2 == 0 {
						var id billing.RequestID
						id[0], id[1] = byte(i), 1
						if _, err := s.Admit(ctx, driver.Step{Account: "acme", Request: id, Rate: &limit, Now: now}); err != nil {
							t.Errorf("step %d: %v", i, err)
						}
						return
					}
					c := checks[i/2%len(checks)]
					if got, err := s.CheckKey(ctx, c.check); err != nil || got != c.want {
						t.Errorf("check %d of key %q: %v, %v; want %v", i, c.check.KeyID, got, err, c.want)
					}
				})
			}
			wg.Wait()
		})
	}
}
