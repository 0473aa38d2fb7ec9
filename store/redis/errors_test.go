package redis_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// failFast configures a client as the package documentation recommends for a
// service: short dial and I/O timeouts, one retry at most.
func failFast(o *goredis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = 250*time.Millisecond, 250*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond
	o.DialerRetries, o.MaxRetries = 1, 1
}

// everyMethod calls every method of the Store once and returns their errors by name.
func everyMethod(ctx context.Context, s *redis.Store) map[string]error {
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	p := driver.MonthOf(t0)
	l := driver.Limit{Rate: 1, Per: time.Second, Burst: 1}
	key := auth.Key{ID: "k", AccountID: "a", Hash: newHash()}
	req := newRequest()
	errs := map[string]error{}
	errs["CreateAccount"] = s.CreateAccount(ctx, auth.Account{ID: "a"}, key)
	errs["CreateKey"] = s.CreateKey(ctx, key, auth.KeyLimit{})
	_, errs["Account"] = s.Account(ctx, "a")
	_, errs["Key"] = s.Key(ctx, "k")
	_, errs["Keys"] = s.Keys(ctx, auth.KeyQuery{Account: "a"})
	_, _, errs["Resolve"] = s.Resolve(ctx, key.Hash)
	_, errs["RotateKey"] = s.RotateKey(ctx, "k", auth.AnyRevision, newHash(), t0)
	_, errs["RevokeKey"] = s.RevokeKey(ctx, "k", auth.AnyRevision, t0)
	_, errs["CheckKey"] = s.CheckKey(ctx, driver.KeyCheck{Account: "a"})
	errs["Open"] = s.Open(ctx, driver.Opening{Account: "a", Period: p})
	_, errs["Reserve"] = s.Reserve(ctx, driver.Reservation{Account: "a", Request: req, Period: p, Now: testNow, Expires: testNow.Add(time.Hour)})
	_, errs["Settle"] = s.Settle(ctx, driver.Settlement{Account: "a", Request: req, Period: p})
	_, errs["Adjust"] = s.Adjust(ctx, driver.Adjustment{Account: "a", Request: req, Period: p})
	_, errs["Balance"] = s.Balance(ctx, "a", testNow, p, 1)
	_, errs["Usage"] = s.Usage(ctx, "a", p)
	_, errs["Allow"] = s.Allow(ctx, "a", l, t0)
	_, errs["Peek"] = s.Peek(ctx, "a", l, t0)
	_, errs["Acquire"] = s.Acquire(ctx, "a", req, 1, time.Second, t0)
	errs["Release"] = s.Release(ctx, "a", req)
	errs["Renew"] = s.Renew(ctx, "a", req, time.Second, t0)
	_, errs["InUse"] = s.InUse(ctx, "a", t0)
	_, errs["Admit"] = s.Admit(ctx, driver.Step{Account: "a", Request: req, Rate: &l})
	_, errs["Close"] = s.Close(ctx, driver.Closing{Account: "a", Request: req, ReleaseSlot: true})
	errs["EndSession"] = s.EndSession(ctx, auth.NewSessionID(), t0.Add(time.Hour), t0)
	_, errs["SessionEnded"] = s.SessionEnded(ctx, auth.NewSessionID())
	errs["Ping"] = s.Ping(ctx)
	return errs
}

// TestUnreachable checks that when nothing answers at Redis's address every method
// fails fast with an error that wraps store.ErrUnavailable and no other sentinel, so
// that the service answers 503 and charges nothing.
func TestUnreachable(t *testing.T) {
	c := newClient(freeAddr(t), failFast)
	t.Cleanup(func() { c.Close() })
	s, err := redis.New(c, &redis.Options{Prefix: "tgtest-unreachable"})
	must(t, err)
	hooks, err := redis.NewWebhookStore(c, &redis.WebhookOptions{Prefix: "tgtest-unreachable"})
	must(t, err)
	start := time.Now()
	errs := everyMethod(t.Context(), s)
	errs["WebhookStore.Ping"] = hooks.Ping(t.Context())
	if per := time.Since(start) / time.Duration(len(errs)); per > 250*time.Millisecond {
		t.Errorf("a call to an unreachable Redis took %v on average; it must fail fast", per)
	}
	for name, err := range errs {
		switch {
		case !errors.Is(err, store.ErrUnavailable):
			t.Errorf("%s: %v, want an error wrapping store.ErrUnavailable", name, err)
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, driver.ErrInsufficientCredits):
			t.Errorf("%s: %v also wraps a sentinel of a well-known condition", name, err)
		case !strings.HasPrefix(err.Error(), "redis: "):
			t.Errorf("%s: %q does not begin with the package's name", name, err)
		}
	}
}

// A proxy is a TCP proxy to Redis that the test can cut, as an outage would: it then
// closes every connection and refuses new ones (accepting and closing them), until it
// is restored.
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	down     bool
	conns    map[net.Conn]struct{}
}

func newProxy(t *testing.T, upstream string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.upstream)
		if err != nil {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

// cut closes every connection and refuses new ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// TestOutageFailsClosedAndRecovers checks the failure semantics: while Redis cannot be
// reached, a paid call is not admitted and nothing is charged or held; when it comes
// back, the same Store and client admit again, without a restart. Ping fails during
// the outage and answers nil after it, as a readiness check needs.
func TestOutageFailsClosedAndRecovers(t *testing.T) {
	ctx := t.Context()
	px := newProxy(t, addr(t))
	c := newClient(px.addr(), failFast)
	t.Cleanup(func() { c.Close() })
	s, prefix := newStorePrefix(t, c, &redis.Options{})
	direct := openStore(t, client(t), prefix, &redis.Options{}) // bypasses the proxy

	period := driver.MonthOf(time.Now())
	key := auth.Key{ID: "key", AccountID: "acct", Hash: newHash()}
	must(t, s.CreateAccount(ctx, auth.Account{ID: "acct", Plan: "pro"}, key))
	must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 10, Allowance: 10, Period: period}))
	l := driver.Limit{Rate: 600, Per: time.Minute, Burst: 600}
	step := func() driver.Step {
		req := newRequest()
		return driver.Step{Account: "acct", Request: req, Now: time.Now(),
			Key:     &driver.KeyCheck{Account: "acct", KeyID: key.ID, Hash: key.Hash},
			Rate:    &l,
			Slot:    &driver.SlotClaim{Ceiling: 5, Lease: time.Minute},
			Credits: &driver.Reservation{Account: "acct", Request: req, APIs: []string{"hash"}, Amount: 1, Period: period, Allowance: 10, Now: testNow, Expires: testNow.Add(time.Hour)}}
	}
	admit := func(what string) driver.Step {
		t.Helper()
		st := step()
		r, err := s.Admit(ctx, st)
		if err != nil || r.Denied != driver.NotDenied {
			t.Fatalf("%s: %+v, %v; want admitted", what, r, err)
		}
		return st
	}
	admit("before the outage")

	px.cut()
	start := time.Now()
	for i := range 3 {
		_, err := s.Admit(ctx, step())
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("admission %d during the outage: %v, want store.ErrUnavailable", i, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("three admissions during the outage took %v; they must fail fast", d)
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping during the outage: %v, want store.ErrUnavailable", err)
	}
	b, err := direct.Balance(ctx, "acct", testNow, period, 10)
	must(t, err)
	n, err := direct.InUse(ctx, "acct", time.Now())
	must(t, err)
	if b.Remaining != 9 || n != 1 {
		t.Errorf("after the outage's admissions: remaining %d, slots %d; want 9 and 1 (nothing taken)", b.Remaining, n)
	}

	px.restore()
	// The pool reconnects by itself; a call may still meet a connection the cut closed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := s.Admit(ctx, step())
		if err == nil && r.Denied == driver.NotDenied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admission within 5s of Redis coming back: %+v, %v", r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	admit("after the outage")
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the outage: %v", err)
	}
	b, err = direct.Balance(ctx, "acct", testNow, period, 10)
	must(t, err)
	if b.Remaining != 7 {
		t.Errorf("remaining %d after two admissions since the outage, want 7", b.Remaining)
	}
}

// TestContextEndsDuringCall checks a context that ends while the Store waits for
// Redis (here a server that accepts connections and never answers): the deadline's
// error matches context.DeadlineExceeded and store.ErrUnavailable, a cancellation's
// matches context.Canceled. A deadline ends the wait at once (ContextTimeoutEnabled);
// a cancellation is noticed when the read times out, since go-redis does not abort a
// read in flight: ReadTimeout bounds it.
func TestContextEndsDuringCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn // never answered, closed with the listener's test
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	c := newClient(ln.Addr().String(), func(o *goredis.Options) {
		o.ReadTimeout, o.MaxRetries, o.ContextTimeoutEnabled = 300*time.Millisecond, -1, true
		o.Protocol = 2                    // no HELLO handshake on a server that never answers
		o.DisableIdentity = true          // no CLIENT SETINFO either
		o.MinIdleConns, o.PoolSize = 0, 2 // dial on demand
	})
	t.Cleanup(func() { c.Close() })
	s, err := redis.New(c, &redis.Options{Prefix: "tgtest-blackhole"})
	must(t, err)
	l := driver.Limit{Rate: 1, Per: time.Second, Burst: 1}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Admit(ctx, driver.Step{Account: "a", Request: newRequest(), Rate: &l})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Admit past its deadline: %v, want context.DeadlineExceeded and store.ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Admit with a 100ms deadline returned after %v", d)
	}

	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	_, err = s.Allow(ctx, "a", l, time.Now())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Allow canceled while waiting: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Allow canceled after 50ms, with a read timeout of 300ms, returned after %v", d)
	}
}

// TestStaleHashIndex checks that an index entry from hash to key that the key's
// record no longer backs never resolves: the old hash of a rotated key whose index
// entry survived (a process that stopped between the steps of RotateKey), a hash
// entry naming a key that was never created, and a key id entry naming an account
// without that key.
func TestStaleHashIndex(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, nil)
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	period := driver.MonthOf(t0)
	old := newHash()
	key := auth.Key{ID: "key", AccountID: "acct", Name: "primary", Primary: true, Hash: old, CreatedAt: t0}
	must(t, s.CreateAccount(ctx, auth.Account{ID: "acct", Plan: "pro", CreatedAt: t0}, key))
	must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 10, Allowance: 10, Period: period}))
	cur := newHash()
	_, err := s.RotateKey(ctx, key.ID, auth.AnyRevision, cur, t0)
	must(t, err)

	index := func(h auth.Hash) string { return prefix + ":h:" + h.String() }
	if n, _ := c.Exists(ctx, index(old)).Result(); n != 0 {
		t.Errorf("RotateKey left the old hash's index entry")
	}
	// Put the old entry back, as a rotation stopped before its last step leaves it,
	// and point a further hash at the key too.
	ref, err := c.Get(ctx, index(cur)).Result()
	must(t, err)
	stray := newHash()
	must(t, c.Set(ctx, index(old), ref, 0).Err())
	must(t, c.Set(ctx, index(stray), ref, 0).Err())
	// A key id entry whose creation stopped before the record was written.
	must(t, c.Set(ctx, prefix+":kid:ghost", "acct", 0).Err())

	for name, h := range map[string]auth.Hash{"old": old, "stray": stray} {
		if k, _, err := s.Resolve(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Resolve(%s hash) = key %q, %v; want store.ErrNotFound", name, k.ID, err)
		}
		if st, err := s.CheckKey(ctx, driver.KeyCheck{Account: "acct", KeyID: key.ID, Hash: h}); err != nil || st != driver.KeyUnknown {
			t.Errorf("CheckKey(%s hash) = %d, %v; want KeyUnknown", name, st, err)
		}
		req := newRequest()
		r, err := s.Admit(ctx, driver.Step{Account: "acct", Request: req, Now: t0,
			Key:     &driver.KeyCheck{Account: "acct", KeyID: key.ID, Hash: h},
			Credits: &driver.Reservation{Account: "acct", Request: req, Amount: 1, Period: period, Allowance: 10, Now: testNow, Expires: testNow.Add(time.Hour)}})
		if err != nil || r.Denied != driver.DeniedKey || r.Key != driver.KeyUnknown {
			t.Errorf("Admit with the %s hash: %+v, %v; want denied, KeyUnknown", name, r, err)
		}
	}
	if _, _, err := s.Resolve(ctx, cur); err != nil {
		t.Errorf("Resolve(current hash): %v", err)
	}
	if _, err := s.Key(ctx, "ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Key(ghost) = %v, want store.ErrNotFound", err)
	}
	b, err := s.Balance(ctx, "acct", testNow, period, 10)
	must(t, err)
	if b.Remaining != 10 {
		t.Errorf("remaining %d after admissions with dead hashes, want 10", b.Remaining)
	}
}

// TestAccountIDsThatAreNotTags checks the ids that cannot be a hash tag as they are
// (empty, containing '}') or that begin with the escape character: each is an account
// of its own, even one whose id is the escaped form of another's.
func TestAccountIDsThatAreNotTags(t *testing.T) {
	ctx := t.Context()
	s, prefix := newStorePrefix(t, client(t), nil)
	p := driver.MonthOf(time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC))
	ids := []string{"", "}", "a}b", "~", "~617d62", "~~", "{a}"} // "~617d62" is how "a}b" is written
	for i, id := range ids {
		must(t, s.Open(ctx, driver.Opening{Account: id, Balance: int64(i), Allowance: 100, Period: p}))
	}
	for i, id := range ids {
		b, err := s.Balance(ctx, id, testNow, p, 100)
		must(t, err)
		if b.Remaining != int64(i) {
			t.Errorf("balance of %q = %d, want %d", id, b.Remaining, i)
		}
	}
	keys, err := client(t).Keys(ctx, prefix+":*").Result()
	must(t, err)
	for _, k := range keys {
		if slot(k) != slot(strings.TrimSuffix(k, "bal")+"use") {
			t.Errorf("key %q: an account's keys do not share a slot", k)
		}
	}
	if len(keys) != len(ids) {
		t.Errorf("%d balance keys for %d accounts: %q", len(keys), len(ids), keys)
	}
}

// TestMessages checks that the errors of well-known conditions wrap their sentinels
// and name what they are about.
func TestMessages(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, nil)
	p := driver.MonthOf(time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC))
	must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 5, Allowance: 5, Period: p}))
	req := newRequest()
	_, err := s.Settle(ctx, driver.Settlement{Account: "acct", Request: req, Period: p})
	wantErr(t, "Settle of an unknown reservation", err, store.ErrNotFound, req.String(), `"acct"`)
	_, err = s.Admit(ctx, driver.Step{Account: "ghost", Request: req,
		Credits: &driver.Reservation{Account: "ghost", Request: req, Amount: 1, Period: p, Now: testNow, Expires: testNow.Add(time.Hour)}})
	wantErr(t, "Admit for an account without a balance", err, store.ErrNotFound, `"ghost"`)
	_, err = s.Reserve(ctx, driver.Reservation{Account: "acct", Request: req, Amount: 1, Period: p, Now: testNow, Expires: testNow.Add(time.Hour)})
	must(t, err)
	_, err = s.Close(ctx, driver.Closing{Account: "acct", Request: req,
		Settlement: &driver.Settlement{Account: "acct", Request: req, Refund: 2, Period: p}})
	wantErr(t, "Close refunding more than reserved", err, store.ErrConflict, req.String())
	err = s.Renew(ctx, "acct", req, time.Second, time.Now())
	wantErr(t, "Renew of no slot", err, store.ErrNotFound, req.String(), `"acct"`)
	_, err = s.Reserve(ctx, driver.Reservation{Account: "acct", Request: newRequest(), Amount: 10, Period: p, Now: testNow, Expires: testNow.Add(time.Hour)})
	wantErr(t, "Reserve over the balance", err, driver.ErrInsufficientCredits)
	_, err = s.Allow(ctx, "acct", driver.Limit{Rate: 1, Per: time.Second, Burst: 1 << 40}, time.Now())
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Allow with a window beyond the scripts' range: %v, want a plain error", err)
	}
	if _, err := redis.New(client(t), &redis.Options{Prefix: "a{b"}); err == nil {
		t.Errorf("New accepted a prefix with a brace")
	}
	if _, err := redis.New(nil, nil); err == nil {
		t.Errorf("New accepted a nil client")
	}
}

func wantErr(t *testing.T, op string, err, target error, names ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want an error wrapping %q", op, err, target)
		return
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: %q does not name %s", op, err, n)
		}
	}
}

// TestCloseUndoesAStepInDoubt checks what a caller that does not know whether an
// admission was applied relies on: Close with a full refund undoes a step that was
// applied (refund, slot freed) and answers store.ErrNotFound, taking nothing, for one
// that never was.
func TestCloseUndoesAStepInDoubt(t *testing.T) {
	ctx := t.Context()
	s := newStore(t, nil)
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	p := driver.MonthOf(t0)
	must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 10, Allowance: 10, Period: p}))
	step := func(req driver.RequestID) driver.Step {
		return driver.Step{Account: "acct", Request: req, Now: t0, Slot: &driver.SlotClaim{Ceiling: 5, Lease: time.Minute},
			Credits: &driver.Reservation{Account: "acct", Request: req, APIs: []string{"hash"}, Amount: 3, Period: p, Allowance: 10, Now: testNow, Expires: testNow.Add(time.Hour)}}
	}
	undo := func(req driver.RequestID) error {
		_, err := s.Close(ctx, driver.Closing{Account: "acct", Request: req, ReleaseSlot: true,
			Settlement: &driver.Settlement{Account: "acct", Request: req, Refund: 3, Uncount: []string{"hash"}, Period: p, Allowance: 10}})
		return err
	}
	applied, other := newRequest(), newRequest()
	for _, req := range []driver.RequestID{applied, other} {
		r, err := s.Admit(ctx, step(req))
		if err != nil || r.Denied != driver.NotDenied {
			t.Fatalf("Admit: %+v, %v", r, err)
		}
	}
	if err := undo(newRequest()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("undoing a step that never happened: %v, want store.ErrNotFound", err)
	}
	must(t, undo(applied))
	must(t, undo(applied)) // again: settled, nothing more
	b, err := s.Balance(ctx, "acct", testNow, p, 10)
	must(t, err)
	n, err := s.InUse(ctx, "acct", t0)
	must(t, err)
	u, err := s.Usage(ctx, "acct", p)
	must(t, err)
	if b.Remaining != 7 || b.Used != 3 || n != 1 || u["hash"] != 1 {
		t.Errorf("after undoing one of two steps: remaining %d, used %d, slots %d, usage %v; want 7, 3, 1 and one call",
			b.Remaining, b.Used, n, u)
	}
}

// TestCloseMarkers checks what a closing leaves in the request's marker, which one SET
// with GET both settles and reads: a refund above the amount reserved is refused, frees
// the slot and puts the open reservation back, for another OpenReservationTTL, so that
// a later settlement still refunds; a settled marker is "d", remembered for Retention;
// settling a request admitted without credits finds nothing to refund and leaves "d".
func TestCloseMarkers(t *testing.T) {
	ctx, c := t.Context(), client(t)
	s, prefix := newStorePrefix(t, c, nil)
	t0 := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	p := driver.MonthOf(t0)
	must(t, s.Open(ctx, driver.Opening{Account: "acct", Balance: 10, Allowance: 10, Period: p}))
	marker := func(req driver.RequestID) (string, time.Duration) {
		k := prefix + ":{acct}:r:" + req.String()
		return c.Get(ctx, k).Val(), c.PTTL(ctx, k).Val()
	}
	closing := func(req driver.RequestID, refund int64) error {
		_, err := s.Close(ctx, driver.Closing{Account: "acct", Request: req, ReleaseSlot: true,
			Settlement: &driver.Settlement{Account: "acct", Request: req, Refund: refund, Period: p, Allowance: 10}})
		return err
	}

	req := newRequest()
	r, err := s.Admit(ctx, driver.Step{Account: "acct", Request: req, Now: t0, Slot: &driver.SlotClaim{Ceiling: 1, Lease: time.Minute},
		Credits: &driver.Reservation{Account: "acct", Request: req, Amount: 3, Period: p, Allowance: 10, Now: testNow, Expires: testNow.Add(time.Hour)}})
	if err != nil || r.Denied != driver.NotDenied {
		t.Fatalf("Admit: %+v, %v", r, err)
	}
	if err := closing(req, 4); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("closing with a refund of 4 for 3 reserved: %v, want store.ErrConflict", err)
	}
	if v, ttl := marker(req); !strings.HasPrefix(v, "o 3 ") || ttl < redis.OpenReservationTTL-time.Minute {
		t.Errorf("after the refused refund, the marker is %q for %v; want the open reservation for %v", v, ttl, redis.OpenReservationTTL)
	}
	if n, err := s.InUse(ctx, "acct", t0); err != nil || n != 0 {
		t.Errorf("after the refused refund, %d slots in use (%v); want the slot freed", n, err)
	}
	must(t, closing(req, 3))
	if v, ttl := marker(req); v != "d" || ttl > redis.DefaultRetention || ttl < redis.DefaultRetention-time.Minute {
		t.Errorf("after the settlement, the marker is %q for %v; want \"d\" for %v", v, ttl, redis.DefaultRetention)
	}
	if b, err := s.Balance(ctx, "acct", testNow, p, 10); err != nil || b.Remaining != 10 || b.Used != 0 {
		t.Errorf("after refunding the whole reservation: %+v, %v; want 10 remaining, 0 used", b, err)
	}

	free := newRequest()
	r, err = s.Admit(ctx, driver.Step{Account: "acct", Request: free, Now: t0, Slot: &driver.SlotClaim{Ceiling: 1, Lease: time.Minute}})
	if err != nil || r.Denied != driver.NotDenied {
		t.Fatalf("Admit without credits: %+v, %v", r, err)
	}
	if v, _ := marker(free); v != "a" {
		t.Errorf("after an admission without credits, the marker is %q, want \"a\"", v)
	}
	must(t, closing(free, 0))
	if v, _ := marker(free); v != "d" {
		t.Errorf("after settling an admission without credits, the marker is %q, want \"d\"", v)
	}
	if b, err := s.Balance(ctx, "acct", testNow, p, 10); err != nil || b.Remaining != 10 {
		t.Errorf("settling an admission without credits changed the balance: %+v, %v", b, err)
	}
}
