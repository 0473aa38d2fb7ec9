package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// A batchFixture is one account of TestBatchEqualsSteps: its id, the checks of its live
// key, of a revoked key of its own and of another account's key, and the request ids
// the case uses (the same for both accounts: the ledger, the reservations and the slots
// are kept per account).
type batchFixture struct {
	acct                   string
	live, revoked, foreign driver.KeyCheck
	reqs                   []driver.RequestID
}

// step returns a step of request i at t0 + i µs with every part: the live key, a rate
// limit that never refuses, a slot under a ceiling of 100 and a reservation of 10
// credits for the "hash" API expiring in an hour. change, if given, adjusts it.
func (f batchFixture) step(i int, change ...func(*driver.Step)) driver.Step {
	now := t0.Add(time.Duration(i) * time.Microsecond)
	req := f.reqs[i]
	key := f.live
	st := driver.Step{Account: f.acct, Request: req, Now: now, Key: &key,
		Rate:    &driver.Limit{Rate: 1000, Per: time.Second, Burst: 1000},
		Slot:    &driver.SlotClaim{Ceiling: 100, Lease: time.Minute},
		Credits: &driver.Reservation{Account: f.acct, Request: req, APIs: []string{"hash"}, Amount: 10, Period: period, Allowance: 1000, Now: now, Expires: now.Add(time.Hour)}}
	for _, c := range change {
		c(&st)
	}
	return st
}

// steps returns f.step(i, change...) for each i in is.
func (f batchFixture) steps(is []int, change ...func(*driver.Step)) []driver.Step {
	out := make([]driver.Step, len(is))
	for j, i := range is {
		out[j] = f.step(i, change...)
	}
	return out
}

// closing returns the closing of request i at t0 + 1s: its slot freed and its
// reservation settled with the refund, the "hash" call uncounted when the refund is
// not 0.
func (f batchFixture) closing(i int, refund int64) driver.Closing {
	st := &driver.Settlement{Account: f.acct, Request: f.reqs[i], Refund: refund, Period: period, Allowance: 1000, Now: t0.Add(time.Second)}
	if refund != 0 {
		st.Uncount = []string{"hash"}
	}
	return driver.Closing{Account: f.acct, Request: f.reqs[i], ReleaseSlot: true, Settlement: st}
}

// closings returns f.closing(i, 0) for each i in is.
func (f batchFixture) closings(is []int) []driver.Closing {
	out := make([]driver.Closing, len(is))
	for j, i := range is {
		out[j] = f.closing(i, 0)
	}
	return out
}

// grantLot grants credits that lapse at expires (zero: never) to the fixture's account.
func grantLot(t *testing.T, s *postgres.Store, f batchFixture, credits int64, expires time.Time) {
	t.Helper()
	_, err := s.Adjust(t.Context(), driver.Adjustment{Account: f.acct, Request: driver.RequestID{0xff, byte(credits)}, Amount: credits, Expires: expires,
		Reason: "top-up", Period: period, Allowance: 1000, Now: t0.Add(-time.Second)})
	if err != nil {
		t.Fatal(err)
	}
}

func span(from, to int) []int {
	var is []int
	for i := from; i < to; i++ {
		is = append(is, i)
	}
	return is
}

// A batchCase is a history shared by both accounts, then batches of admissions and
// closings sent together.
type batchCase struct {
	name    string
	balance int64
	shards  int
	opened  driver.Period // the period the balance is opened in; zero: period
	// before runs on each account through a store that sends every call alone.
	before func(t *testing.T, s *postgres.Store, f batchFixture)
	// admits and closes are the batches, sent in this order: first every admission
	// batch, then every batch of closings.
	admits func(f batchFixture) [][]driver.Step
	closes func(f batchFixture) [][]driver.Closing
}

var batchCases = []batchCase{
	{name: "all admitted and settled", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps(span(0, 8)), f.steps(span(8, 12))}
		},
		closes: func(f batchFixture) [][]driver.Closing {
			return [][]driver.Closing{f.closings(span(0, 8)), f.closings([]int{11, 9, 10, 8})}
		}},
	{name: "credits run short", balance: 35,
		admits: func(f batchFixture) [][]driver.Step {
			ss := f.steps(span(0, 7))
			ss[5].Credits.Amount = 5
			ss[6].Credits.Amount = 1
			return [][]driver.Step{ss}
		},
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings(span(0, 7))} }},
	{name: "grants reached", balance: 35,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			grantLot(t, s, f, 30, t0.Add(time.Hour))
			grantLot(t, s, f, 20, time.Time{})
		},
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps(span(0, 3)), f.steps(span(3, 9))}
		},
		closes: func(f batchFixture) [][]driver.Closing {
			return [][]driver.Closing{f.closings(span(0, 3)), {f.closing(3, 10), f.closing(4, 4), f.closing(5, 0)}}
		}},
	{name: "a lot lapses within the batch", balance: 1000,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			grantLot(t, s, f, 30, t0.Add(2*time.Microsecond))
		},
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps(span(0, 4))}
		},
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings(span(0, 4))} }},
	{name: "rate limit", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			ss := f.steps(span(0, 6), func(st *driver.Step) {
				st.Rate = &driver.Limit{Rate: 1, Per: time.Second, Burst: 4}
			})
			ss[1].Events = 2
			ss[3].Events = 2
			return [][]driver.Step{ss}
		}},
	{name: "slot ceiling", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			limit := func(st *driver.Step) { st.Slot.Ceiling = 3 }
			return [][]driver.Step{f.steps(span(0, 5), limit), f.steps(span(5, 7), limit)}
		},
		closes: func(f batchFixture) [][]driver.Closing {
			return [][]driver.Closing{{f.closing(0, 0), {Account: f.acct, Request: f.reqs[1], ReleaseSlot: true}}}
		}},
	{name: "keys", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			ss := f.steps(span(0, 7))
			ss[1].Key = &f.revoked
			ss[2].Key = &driver.KeyCheck{Account: f.acct, KeyID: f.live.KeyID, Hash: auth.HashKey("wrong")}
			ss[3].Key = &f.foreign
			ss[4].Key = &driver.KeyCheck{Account: f.acct} // a session's check: the account exists
			ss[5].Key = nil
			return [][]driver.Step{ss}
		}},
	{name: "key checks alone, repeated", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			// Steps that only check a key, as a credit block's calls send them: one
			// statement for the batch, each distinct check sent once.
			wrong := driver.KeyCheck{Account: f.acct, KeyID: f.live.KeyID, Hash: auth.HashKey("wrong")}
			session := driver.KeyCheck{Account: f.acct}
			checks := []*driver.KeyCheck{&f.live, &f.revoked, &f.live, &wrong, &f.live, &f.revoked, &f.foreign, &session, &f.live, &session}
			ss := f.steps(span(0, len(checks)), func(st *driver.Step) { st.Rate, st.Slot, st.Credits = nil, nil, nil })
			for i, c := range checks {
				ss[i].Key = c
			}
			return [][]driver.Step{ss}
		}},
	{name: "no credits", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps(span(0, 4), func(st *driver.Step) { st.Credits, st.Key = nil, nil })}
		},
		closes: func(f batchFixture) [][]driver.Closing {
			return [][]driver.Closing{{{Account: f.acct, Request: f.reqs[0], ReleaseSlot: true}, {Account: f.acct, Request: f.reqs[2], ReleaseSlot: true}}}
		}},
	{name: "replay", balance: 1000,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) { admitOne(t, s, f.step(1)) },
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 4))} }},
	{name: "replay refused its credits", balance: 15,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			// Its slot freed, its reservation open: only the ledger knows it.
			admitOne(t, s, f.step(2))
			if _, err := s.Close(t.Context(), driver.Closing{Account: f.acct, Request: f.reqs[2], ReleaseSlot: true}); err != nil {
				t.Fatal(err)
			}
		},
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 4))} }},
	{name: "replay without credits", balance: 1000,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			admitOne(t, s, f.step(1, func(st *driver.Step) { st.Credits = nil }))
		},
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps(span(0, 3), func(st *driver.Step) { st.Credits = nil })}
		}},
	{name: "voided before its admission", balance: 1000,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			if _, err := s.Close(t.Context(), f.closing(2, 10)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("undo of an admission that has not arrived: %v, want store.ErrNotFound", err)
			}
		},
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 4))} }},
	{name: "a request twice", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps([]int{0, 1, 0, 2})} },
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings([]int{0, 1, 0})} }},
	{name: "a request twice without credits", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps([]int{0, 1, 0}, func(st *driver.Step) { st.Credits = nil })}
		}},
	{name: "sharded", balance: 1000, shards: 4,
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 6))} },
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings(span(0, 6))} }},
	{name: "expired reservation due", balance: 1000,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			admitOne(t, s, f.step(9, func(st *driver.Step) {
				st.Now = t0.Add(-time.Hour)
				st.Credits.Now, st.Credits.Expires = st.Now, t0.Add(-time.Minute)
			}))
		},
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 4))} },
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings(span(0, 4))} }},
	{name: "renewal", balance: 5, opened: driver.MonthOf(t0.AddDate(0, -1, 0)),
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 4))} },
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings(span(0, 4))} }},
	{name: "a lease ends within the batch", balance: 1000,
		before: func(t *testing.T, s *postgres.Store, f batchFixture) {
			admitOne(t, s, f.step(9, func(st *driver.Step) {
				st.Now = t0.Add(-time.Minute)
				st.Credits.Now = st.Now
				st.Slot.Lease = time.Minute + 2*time.Microsecond
			}))
		},
		admits: func(f batchFixture) [][]driver.Step {
			return [][]driver.Step{f.steps(span(0, 4), func(st *driver.Step) { st.Slot.Ceiling = 3 })}
		}},
	{name: "refunds", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 4))} },
		closes: func(f batchFixture) [][]driver.Closing {
			return [][]driver.Closing{{f.closing(0, 0), f.closing(1, 4), f.closing(2, 10), f.closing(3, 11)}}
		}},
	{name: "closings of unknown and settled reservations", balance: 1000,
		admits: func(f batchFixture) [][]driver.Step { return [][]driver.Step{f.steps(span(0, 3))} },
		closes: func(f batchFixture) [][]driver.Closing {
			return [][]driver.Closing{f.closings([]int{0, 1}), f.closings([]int{1, 2}), f.closings([]int{5, 6}), f.closings([]int{2, 6})}
		}},
}

// admitOne admits a step alone and fails the test on an error.
func admitOne(t *testing.T, s *postgres.Store, st driver.Step) {
	t.Helper()
	if _, err := s.Admit(t.Context(), st); err != nil {
		t.Fatal(err)
	}
}

// TestBatchEqualsSteps sends batches of admissions and closings of one account in one
// call each, and the same steps one call each to a twin account with the same history:
// every step's answer and the state they leave (balance, call counts, ledger, open
// reservations, next expiry, rate, slots) are the same, whether the batch was decided
// as a whole or, for the special cases, one step after the other; and on accounts split
// into shards, whose batches are decided on one of them.
func TestBatchEqualsSteps(t *testing.T) {
	pool := newPool(t, 4)
	batched, err := postgres.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	single, err := postgres.New(pool, &postgres.Options{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	other, otherKey := fixture("other")
	if err := single.CreateAccount(ctx, other, otherKey); err != nil {
		t.Fatal(err)
	}
	// Every case again on accounts of 4 shards, whose batches take from one shard.
	cases := batchCases
	for _, c := range batchCases {
		if c.shards == 0 {
			c.name += ", 4 shards"
			c.shards = 4
			cases = append(cases, c)
		}
	}
	cases = append(cases, batchCase{name: "refused by a shard and the account, 4 shards", balance: 12, shards: 4,
		admits: func(f batchFixture) [][]driver.Step {
			ss := f.steps(span(0, 2))
			ss[0].Credits.Amount = 3
			ss[1].Credits.Amount = 20
			return [][]driver.Step{ss}
		},
		closes: func(f batchFixture) [][]driver.Closing { return [][]driver.Closing{f.closings(span(0, 2))} }})
	for n, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reqs := make([]driver.RequestID, 12)
			for i := range reqs {
				reqs[i] = newRequest()
			}
			var fs [2]batchFixture
			for i, suffix := range []string{"batch", "single"} {
				fs[i] = newBatchFixture(t, pool, single, fmt.Sprintf("c%d-%s", n, suffix), c, reqs, otherKey)
				if c.before != nil {
					c.before(t, single, fs[i])
				}
			}
			var admits [2][][]driver.Step
			var closes [2][][]driver.Closing
			for i := range fs {
				admits[i] = c.admits(fs[i])
				if c.closes != nil {
					closes[i] = c.closes(fs[i])
				}
			}
			for b := range admits[0] {
				got, gotErrs, err := batched.AdmitBatch(ctx, fs[0].acct, admits[0][b])
				if err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
				for i, st := range admits[1][b] {
					want, wantErr := single.Admit(ctx, st)
					if !reflect.DeepEqual(got[i], want) || errClass(gotErrs[i]) != errClass(wantErr) {
						t.Errorf("batch %d, step %d: %+v, %v; one by one: %+v, %v", b, i, got[i], gotErrs[i], want, wantErr)
					}
				}
			}
			for b := range closes[0] {
				got, gotErrs, err := batched.CloseBatch(ctx, fs[0].acct, closes[0][b])
				if err != nil {
					t.Fatalf("closings %d: %v", b, err)
				}
				for i, c := range closes[1][b] {
					want, wantErr := single.Close(ctx, c)
					if !reflect.DeepEqual(got[i], want) || errClass(gotErrs[i]) != errClass(wantErr) {
						t.Errorf("closings %d, closing %d: %+v, %v; one by one: %+v, %v", b, i, got[i], gotErrs[i], want, wantErr)
					}
				}
			}
			if got, want := accountState(t, pool, fs[0].acct, c.shards), accountState(t, pool, fs[1].acct, c.shards); got != want {
				t.Errorf("after the batches:\n%s\none by one:\n%s", got, want)
			}
		})
	}
}

// newBatchFixture creates an account with a live and a revoked key and opens its
// balance as the case says.
func newBatchFixture(t *testing.T, db postgres.DB, s *postgres.Store, id string, c batchCase, reqs []driver.RequestID, foreign auth.Key) batchFixture {
	t.Helper()
	ctx := t.Context()
	a, k := fixture(id)
	must(t, s.CreateAccount(ctx, a, k))
	revoked := auth.Key{ID: id + "-revoked", AccountID: id, Name: "old", Hash: auth.HashKey(auth.NewKeyValue()), CreatedAt: t0}
	must(t, s.CreateKey(ctx, revoked, auth.KeyLimit{}))
	if _, err := s.RevokeKey(ctx, revoked.ID, 0, t0); err != nil {
		t.Fatal(err)
	}
	opened := c.opened
	if opened.Start.IsZero() {
		opened = period
	}
	if c.shards > 1 {
		sh, err := postgres.New(db, &postgres.Options{Shards: c.shards, Batch: 1})
		must(t, err)
		s = sh
	}
	must(t, s.Open(ctx, driver.Opening{Account: id, Balance: c.balance, Allowance: 1000, Period: opened}))
	return batchFixture{acct: id, reqs: reqs,
		live:    driver.KeyCheck{Account: id, KeyID: k.ID, Hash: k.Hash},
		revoked: driver.KeyCheck{Account: id, KeyID: revoked.ID, Hash: revoked.Hash},
		foreign: driver.KeyCheck{Account: foreign.AccountID, KeyID: foreign.ID, Hash: foreign.Hash}}
}

// errClass names the sentinel an error of the store wraps, or "" for no error.
func errClass(err error) string {
	for _, s := range []error{store.ErrNotFound, store.ErrConflict, store.ErrInvalid, driver.ErrVoided, driver.ErrInsufficientCredits} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

// accountState describes what an account's rows hold, without its name: the balance
// (per shard, or summed over several), the call counts, next_expiry, the rate row, the
// live slots, the ledger entries and the open reservations.
func accountState(t *testing.T, db postgres.DB, acct string, shards int) string {
	t.Helper()
	var b strings.Builder
	queries := []string{
		`SELECT allowance, period_start, next_expiry, shards FROM tollgate_balances WHERE account_id = $1`,
		`SELECT sum(balance), sum(used) FROM tollgate_balance_shards WHERE account_id = $1`,
		`SELECT e.key, sum(e.value::bigint) FROM tollgate_balance_shards s, jsonb_each_text(s.usage) e
		  WHERE s.account_id = $1 GROUP BY e.key ORDER BY e.key`,
		`SELECT tat FROM tollgate_rate_limits WHERE key = $1`,
		`SELECT holder, expires FROM tollgate_slots WHERE key = $1 AND holder IS NOT NULL ORDER BY holder`,
		`SELECT request_id, kind, amount, period_start, apis, lots, granted FROM tollgate_ledger WHERE account_id = $1
		  ORDER BY request_id NULLS FIRST, kind, amount`,
		`SELECT expires, credits FROM tollgate_grant_lots WHERE account_id = $1 ORDER BY expires`,
		`SELECT request_id, expires FROM tollgate_reservations WHERE account_id = $1 ORDER BY request_id`,
	}
	if shards <= 1 {
		queries = append(queries, `SELECT shard, balance, used, usage FROM tollgate_balance_shards WHERE account_id = $1 ORDER BY shard`,
			`SELECT request_id, shard, generation FROM tollgate_ledger WHERE account_id = $1 ORDER BY request_id NULLS FIRST, kind`)
	}
	for _, q := range queries {
		rows, err := db.Query(context.Background(), q, acct)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			vs, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vs...)
		}
		rows.Close()
		must(t, rows.Err())
		b.WriteString("--\n")
	}
	return b.String()
}
