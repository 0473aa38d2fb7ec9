package session

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate"
)

// FailedSignIns bounds the sign-ins that fail (a key that is unknown, malformed,
// revoked, expired or not allowed from the address; a refusal of the host's Login):
// each client address, and each key value tried, has a bucket of Burst failures that
// refills one failure every Every. While its bucket is empty, a sign-in from that
// address, or with that key, is refused before it is checked: 429 (CodeRateLimited)
// with Retry-After. A sign-in that succeeds takes nothing from the buckets. Every
// failed sign-in is logged at INFO (its address, what was tried and why it failed,
// never the key), and the start of a throttle at WARN.
//
// IPv6 addresses are counted by their /64, which one client usually holds whole. The
// counts are each instance's own, in memory, for at most MaxTracked addresses and as
// many keys: past that the buckets that have refilled are forgotten first, then any.
// A refusal of the host's Login names no account, so the Login, which knows whom the
// person claimed to be, throttles per account itself if it needs to.
type FailedSignIns struct {
	// Burst is the failures allowed in a row; the default is [DefaultFailedSignInBurst].
	// A negative Burst turns the throttle off (failures are still logged).
	Burst int
	// Every is how often one more failure is allowed once the burst is spent; the
	// default is [DefaultFailedSignInEvery].
	Every time.Duration
	// MaxTracked bounds the addresses, and the keys, counted at once; the default is
	// [DefaultFailedSignInTracked].
	MaxTracked int
}

// The defaults of [FailedSignIns]: 10 failures in a row, then 2 a minute.
const (
	DefaultFailedSignInBurst   = 10
	DefaultFailedSignInEvery   = 30 * time.Second
	DefaultFailedSignInTracked = 10000
)

// failures is the throttle of failed sign-ins (see [FailedSignIns]).
type failures struct {
	burst   float64
	every   time.Duration
	max     int
	mu      sync.Mutex
	buckets map[string]*bucket // by "a" + address prefix, or "k" + key hash
}

// bucket is the state of one token bucket: its tokens at at.
type bucket struct {
	tokens float64
	at     time.Time
}

func newFailures(o FailedSignIns) *failures {
	if o.Burst < 0 {
		return nil
	}
	f := &failures{burst: float64(o.Burst), every: o.Every, max: o.MaxTracked, buckets: map[string]*bucket{}}
	if o.Burst == 0 {
		f.burst = DefaultFailedSignInBurst
	}
	if f.every <= 0 {
		f.every = DefaultFailedSignInEvery
	}
	if f.max <= 0 {
		f.max = DefaultFailedSignInTracked
	}
	return f
}

// subjects returns the buckets' names of a sign-in from addr with the key value key
// ("" for none).
func subjects(addr netip.Addr, key string) []string {
	out := make([]string, 0, 2)
	if addr.IsValid() {
		p := netip.PrefixFrom(addr, addr.BitLen())
		if addr.Is6() && !addr.Is4In6() {
			p = netip.PrefixFrom(addr, 64)
		}
		p = p.Masked()
		out = append(out, "a"+p.String())
	}
	if key != "" {
		sum := sha256.Sum256([]byte(key))
		out = append(out, fmt.Sprintf("k%x", sum[:16]))
	}
	return out
}

// tokens returns b's tokens at now.
func (f *failures) tokens(b *bucket, now time.Time) float64 {
	return math.Min(f.burst, b.tokens+float64(now.Sub(b.at))/float64(f.every))
}

// wait returns how long the subjects must wait before they may try again: zero if
// every bucket has a failure left.
func (f *failures) wait(subjects []string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var wait time.Duration
	for _, s := range subjects {
		if b, ok := f.buckets[s]; ok {
			if t := f.tokens(b, now); t < 1 {
				wait = max(wait, time.Duration((1-t)*float64(f.every)))
			}
		}
	}
	return wait
}

// fail takes a failure from each subject's bucket, and reports whether one of them
// is now empty (the throttle starts).
func (f *failures) fail(subjects []string, now time.Time) (emptied bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subjects {
		b, ok := f.buckets[s]
		if !ok {
			f.makeRoom(now)
			b = &bucket{tokens: f.burst, at: now}
			f.buckets[s] = b
		}
		b.tokens, b.at = max(0, f.tokens(b, now)-1), now
		emptied = emptied || b.tokens < 1
	}
	return emptied
}

// makeRoom forgets buckets, when there are as many as allowed: the full ones (which
// are as if absent), else any one.
func (f *failures) makeRoom(now time.Time) {
	if len(f.buckets) < 2*f.max {
		return
	}
	for s, b := range f.buckets {
		if f.tokens(b, now) >= f.burst {
			delete(f.buckets, s)
		}
	}
	for s := range f.buckets {
		if len(f.buckets) < 2*f.max {
			break
		}
		delete(f.buckets, s)
	}
}

// signInAllowed refuses a sign-in from addr with the key value key ("" for the host's
// Login) while the throttle holds their failures.
func (h *Handler) signInAllowed(addr netip.Addr, key string) error {
	if h.failures == nil {
		return nil
	}
	if wait := h.failures.wait(subjects(addr, key), h.svc.Now()); wait > 0 {
		return &tollgate.Error{Code: tollgate.CodeRateLimited, RetryAfter: wait, Message: fmt.Sprintf(
			"too many failed sign-ins from your address or with this key: try again in %d seconds", int(math.Ceil(wait.Seconds())))}
	}
	return nil
}

// signInFailed counts and logs a sign-in that failed with err, if err is the
// credential's failure (not the service's, nor a malformed request).
func (h *Handler) signInFailed(r *http.Request, addr netip.Addr, key, with string, err error) {
	var e *tollgate.Error
	if !errors.As(err, &e) || e.Code != tollgate.CodeUnauthorized && e.Code != tollgate.CodeForbidden {
		return
	}
	h.log.LogAttrs(r.Context(), slog.LevelInfo, "session: a sign-in failed", slog.String("address", addr.String()),
		slog.String("with", with), slog.String("code", e.Code.String()), slog.String("why", e.Message))
	if h.failures != nil && h.failures.fail(subjects(addr, key), h.svc.Now()) {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "session: failed sign-ins are throttled", slog.String("address", addr.String()),
			slog.String("with", with))
	}
}
