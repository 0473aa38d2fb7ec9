package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/store/redis"
	"github.com/tollgate-dev/tollgate/webhook"
)

// crc16 is the CRC-16/XMODEM of Redis Cluster (polynomial 0x1021, initial value 0),
// the Store's own, which TestSlotFunction checks.
func crc16(b []byte) uint16 { return redis.CRC16(string(b)) }

// slot returns the Cluster slot of a key: the CRC16 of its hash tag (what lies between
// the first '{' and the first '}' after it, if that is not empty), or of the whole key,
// modulo 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % 16384)
}

func TestSlotFunction(t *testing.T) {
	// The check value of CRC-16/XMODEM, and slots from the Redis documentation.
	if got := crc16([]byte("123456789")); got != 0x31c3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]int{"somekey": 11058, "foo": 12182, "bar": 5061, "{foo}.bar": 12182, "x{bar}y": 5061, "a{}b": slot("a{}b")} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
	if slot("a{}b") == slot("") {
		t.Errorf("an empty hash tag must not count as a tag")
	}
}

// A recorder is a go-redis hook that records every command a client sends.
type recorder struct {
	mu   sync.Mutex
	cmds [][]any
}

func (r *recorder) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *recorder) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			r.record(c)
		}
		return next(ctx, cmds)
	}
}

func (r *recorder) record(cmd goredis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, cmd.Args())
}

func (r *recorder) take() [][]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cmds
	r.cmds = nil
	return c
}

// keysOf returns the keys a command names: the declared KEYS of a script, the first
// argument of a single-key command.
func keysOf(args []any) (name string, keys []string) {
	name = strings.ToLower(fmt.Sprint(args[0]))
	switch name {
	case "eval", "evalsha":
		n, _ := strconv.Atoi(fmt.Sprint(args[2]))
		for _, k := range args[3 : 3+n] {
			keys = append(keys, fmt.Sprint(k))
		}
		return name, keys
	case "ping", "script", "hello", "client", "time", "scan":
		return name, nil
	}
	return name, []string{fmt.Sprint(args[1])}
}

// TestEveryScriptOnOneSlot drives every script of the Store, and every command it
// sends, and checks with the Cluster slot function that the keys of each command hash
// to one slot, and that the keys of an account's records hash to its account's slot.
// Accounts include ids that cannot be a hash tag as they are ("", "a}b") and one that
// looks like an escaped id ("~61").
func TestEveryScriptOnOneSlot(t *testing.T) {
	rec := &recorder{}
	c := newClient(addr(t), nil)
	t.Cleanup(func() { c.Close() })
	c.AddHook(rec)
	s, prefix := newStorePrefix(t, c, nil)
	ctx := t.Context()
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	period := driver.MonthOf(t0)

	for _, acct := range []string{"acme", "", "a}b", "~61", "{x}"} {
		h := newHash()
		key := auth.Key{ID: "k-" + acct, AccountID: acct, Name: "primary", Primary: true, Hash: h, CreatedAt: t0}
		must(t, s.CreateAccount(ctx, auth.Account{ID: acct, Plan: "p", CreatedAt: t0}, key))
		second := auth.Key{ID: "k2-" + acct, AccountID: acct, Name: "ci", Hash: newHash(), CreatedAt: t0}
		must(t, s.CreateKey(ctx, second, auth.KeyLimit{}))
		_, err := s.Key(ctx, key.ID)
		must(t, err)
		_, err = s.Keys(ctx, auth.KeyQuery{Account: acct})
		must(t, err)
		_, _, err = s.Resolve(ctx, h)
		must(t, err)
		h2 := newHash()
		// A change kept in the account's journal, with the index of journals and of
		// the entries' ids.
		entry := journal.Entry{ID: "change-" + acct, At: t0, Change: []byte("rotated")}
		rotated, err := s.RotateKey(journal.With(ctx, entry), key.ID, auth.AnyRevision, h2, t0)
		must(t, err)
		updated, err := s.UpdateKey(ctx, auth.KeyUpdate{ID: key.ID, Name: "main", Revision: rotated.Revision})
		must(t, err)
		_, err = s.CheckKey(ctx, driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: h2, Revision: updated.Revision})
		must(t, err)
		_, err = s.RevokeKey(ctx, second.ID, auth.AnyRevision, t0)
		must(t, err)
		if acct == "acme" { // as an older version of the Store left it: no field krev
			must(t, c.HDel(ctx, prefix+":{acme}:keys", "krev").Err())
		}
		third := auth.Key{ID: "k3-" + acct, AccountID: acct, Name: "ci", Hash: newHash(), CreatedAt: t0}
		must(t, s.CreateKey(ctx, third, auth.KeyLimit{Max: 10, RevokedSince: t0}))

		must(t, s.Open(ctx, driver.Opening{Account: acct, Balance: 100, Allowance: 100, Period: period}))
		r1, r2 := newRequest(), newRequest()
		_, err = s.Reserve(ctx, driver.Reservation{Account: acct, Request: r1, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)})
		must(t, err)
		_, err = s.Settle(ctx, driver.Settlement{Account: acct, Request: r1, Refund: 1, Uncount: []string{"hash"}, Period: period, Allowance: 100})
		must(t, err)
		_, err = s.Adjust(ctx, driver.Adjustment{Account: acct, Request: r2, Amount: 5, Period: period, Allowance: 100})
		must(t, err)
		// A credit block rolled over to the next, which is then settled.
		b1, b2 := newRequest(), newRequest()
		_, err = s.Reserve(ctx, driver.Reservation{Account: acct, Request: b1, Amount: 3, Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)})
		must(t, err)
		_, err = s.Roll(ctx, driver.Roll{Settlement: driver.Settlement{Account: acct, Request: b1, Refund: 2, Period: period, Allowance: 100, Now: testNow},
			Counts: map[string]int64{"hash": 1},
			Next:   &driver.Reservation{Account: acct, Request: b2, Amount: 2, Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)}})
		must(t, err)
		_, err = s.Settle(ctx, driver.Settlement{Account: acct, Request: b2, Refund: 2, Period: period, Allowance: 100, Now: testNow})
		must(t, err)
		_, err = s.Balance(ctx, acct, testNow, period, 100)
		must(t, err)
		_, err = s.Usage(ctx, acct, period)
		must(t, err)

		l := driver.Limit{Rate: 60, Per: time.Minute, Burst: 5}
		_, err = s.Allow(ctx, acct, l, t0)
		must(t, err)
		_, err = s.Peek(ctx, acct, l, t0)
		must(t, err)
		holder := newRequest()
		_, err = s.Acquire(ctx, acct, holder, 2, time.Minute, t0)
		must(t, err)
		must(t, s.Renew(ctx, acct, holder, time.Minute, t0))
		_, err = s.InUse(ctx, acct, t0)
		must(t, err)
		must(t, s.Release(ctx, acct, holder))

		req := newRequest()
		step := driver.Step{Account: acct, Request: req, Now: t0,
			Key:     &driver.KeyCheck{Account: acct, KeyID: key.ID, Hash: h2, Revision: updated.Revision},
			Rate:    &l,
			Slot:    &driver.SlotClaim{Ceiling: 2, Lease: time.Minute},
			Credits: &driver.Reservation{Account: acct, Request: req, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 100, Now: testNow, Expires: testNow.Add(time.Hour)}}
		res, err := s.Admit(ctx, step)
		must(t, err)
		if res.Denied != driver.NotDenied {
			t.Fatalf("account %q: admission denied: %+v", acct, res)
		}
		_, err = s.Close(ctx, driver.Closing{Account: acct, Request: req, ReleaseSlot: true,
			Settlement: &driver.Settlement{Account: acct, Request: req, Period: period, Allowance: 100}})
		must(t, err)

		// A reservation that expires, voided by a sweep.
		lost := newRequest()
		_, err = s.Reserve(ctx, driver.Reservation{Account: acct, Request: lost, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 100, Now: t0, Expires: t0.Add(time.Minute)})
		must(t, err)
		if n, err := s.Sweep(ctx, t0.Add(time.Hour), 10); err != nil || n != 1 {
			t.Errorf("account %q: Sweep voided %d reservations (%v), want 1", acct, n, err)
		}

		// An idempotency record, claimed, completed, and one abandoned: a key of its
		// own, outside any account's slot.
		for _, done := range []bool{true, false} {
			c := idempotency.Claim{ID: idempotency.NewID(acct, fmt.Sprint(done)), Now: t0, Lease: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}
			_, err = s.Idempotency().Claim(ctx, c)
			must(t, err)
			if done {
				must(t, s.Idempotency().Complete(ctx, c.ID, c.Token, []byte("{}")))
			} else {
				must(t, s.Idempotency().Abandon(ctx, c.ID, c.Token))
			}
		}
	}

	// The journal: its entries claimed, and removed, through the index of ids.
	claimed, err := s.Claim(ctx, t0.Add(time.Hour), t0.Add(time.Hour), time.Minute, 100)
	if err != nil || len(claimed) != 5 {
		t.Errorf("Claim: %d entries (%v), want one per account", len(claimed), err)
	}
	other := openStore(t, c, prefix, nil) // another instance, which finds the entries' accounts
	for _, e := range claimed {
		must(t, other.Remove(ctx, e.ID))
	}
	if left, err := s.Claim(ctx, t0.Add(time.Hour), t0.Add(2*time.Hour), time.Minute, 100); err != nil || len(left) != 0 {
		t.Errorf("Claim after Remove: %d entries (%v), want none", len(left), err)
	}

	if n, err := s.PruneKeys(ctx, t0.Add(time.Hour)); err != nil || n != 5 {
		t.Errorf("PruneKeys: %d, %v; want the 5 revoked keys", n, err)
	}

	// The account lifecycle: a listing (and the index of account ids built again, as
	// for accounts of an older version), an update, and the deletion of each account.
	_, err = s.Accounts(ctx, auth.AccountQuery{Plan: "p", Limit: 2})
	must(t, err)
	_, err = s.ExpiringKeys(ctx, auth.ExpiryQuery{To: t0.Add(1000 * time.Hour)})
	must(t, err)
	_, err = s.IndexAccounts(ctx)
	must(t, err)
	for _, acct := range []string{"acme", "", "a}b", "~61", "{x}"} {
		a, err := s.Account(ctx, acct)
		must(t, err)
		u := a.Update()
		u.State = auth.AccountClosed
		_, err = s.UpdateAccount(ctx, u)
		must(t, err)
		must(t, s.DeleteAccount(ctx, acct))
	}

	// The webhook outbox: every script of the WebhookStore, under the same prefix.
	driveWebhooks(t, c, prefix)

	cmds := rec.take()
	seen := map[string]bool{}
	for _, args := range cmds {
		name, keys := keysOf(args)
		if name == "evalsha" || name == "eval" {
			seen[fmt.Sprint(args[1])] = true
		}
		for _, k := range keys {
			if slot(k) != slot(keys[0]) {
				t.Errorf("%s on keys in different slots: %q (%d) and %q (%d)", name, keys[0], slot(keys[0]), k, slot(k))
			}
			if !strings.HasPrefix(k, prefix+":") {
				t.Errorf("%s: key %q is outside the prefix %q", name, k, prefix)
			}
		}
		if len(keys) > 1 && !strings.Contains(keys[0], ":{") {
			t.Errorf("%s on several keys without a hash tag: %q", name, keys)
		}
	}
	for name, sc := range redis.Scripts {
		// A script is seen by its SHA-1 (EVALSHA) or, the first time, by its source.
		if !seen[sc.Hash()] && !sawSource(cmds, sc) {
			t.Errorf("script %s never ran: the workload must cover it", name)
		}
	}
}

func sawSource(cmds [][]any, sc *goredis.Script) bool {
	for _, args := range cmds {
		if name, _ := keysOf(args); name == "eval" {
			if sc.Hash() == sha1Hex(fmt.Sprint(args[1])) {
				return true
			}
		}
	}
	return false
}

func sha1Hex(src string) string { return goredis.NewScript(src).Hash() }

func newHash() auth.Hash { return auth.HashKey(auth.NewKeyValue()) }

func newRequest() driver.RequestID {
	var id driver.RequestID
	rand.Read(id[:])
	return id
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// freeAddr returns an address on which nothing listens.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// driveWebhooks runs every script of a WebhookStore on c under prefix: endpoints
// created, updated, listed and deleted, messages enqueued, claimed, recorded, resent,
// listed and pruned.
func driveWebhooks(t *testing.T, c goredis.UniversalClient, prefix string) {
	ctx := t.Context()
	s, err := redis.NewWebhookStore(c, &redis.WebhookOptions{Prefix: prefix})
	must(t, err)
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	for _, acct := range []string{"acme", "", "a}b", "{x}"} {
		e, err := s.CreateEndpoint(ctx, webhook.Endpoint{ID: "ep-" + acct, Account: acct, URL: "https://example.com/", Secret: "whsec_x", Created: t0})
		must(t, err)
		e.URL = "https://example.com/2"
		_, err = s.UpdateEndpoint(ctx, e)
		must(t, err)
		_, err = s.Endpoints(ctx, acct)
		must(t, err)
		_, _, err = s.Enqueue(ctx, webhook.Message{ID: "msg-" + acct, Type: "key.rotated", Account: acct, At: t0, Body: []byte("{}")}, []string{e.ID}, t0)
		must(t, err)
		ds, err := s.Claim(ctx, t0, time.Minute, 10)
		must(t, err)
		for _, d := range ds {
			must(t, s.Record(ctx, webhook.Outcome{Endpoint: d.Endpoint, Message: d.Message.ID, Claim: d.Claim, State: webhook.Delivered, Attempt: webhook.Attempt{At: t0, Status: 200}}))
		}
		_, err = s.Resend(ctx, e.ID, "msg-"+acct, t0)
		must(t, err)
		_, err = s.Deliveries(ctx, e.ID, webhook.Query{})
		must(t, err)
		_, err = s.Pending(ctx)
		must(t, err)
		must(t, s.DeleteEndpoint(ctx, e.ID))
	}
	_, err = s.Prune(ctx, t0.Add(time.Hour))
	must(t, err)
	sw, ok, err := s.ClaimSweep(ctx, "key.expired", t0, time.Minute)
	must(t, err)
	if !ok {
		t.Fatal("ClaimSweep refused")
	}
	must(t, s.RecordSweep(ctx, "key.expired", sw.Claim, "p"))
}
