package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
)

// A result is what an attempt came to.
type result struct {
	// at is when the attempt was made: its webhook-timestamp.
	at time.Time
	// status is the answer's HTTP status; 0 without an answer.
	status int
	// err says why the attempt failed; empty when it succeeded.
	err string
	// retryAfter is the answer's Retry-After header.
	retryAfter string
	// held, when it is set, tells that no attempt was made: the endpoint is held
	// back (it did not answer lately), until held.
	held time.Time
}

// refusedDestination is the error of every destination the address policy refuses,
// whatever the reason, so that an endpoint's owner cannot map the service's network
// by the answers.
const refusedDestination = "the endpoint's host cannot be delivered to: deliveries go only to hosts with public internet addresses; check the endpoint's url"

// attempt makes one attempt to deliver m to ep, under the deliverer's timeout, unless
// ep is held back. It returns a result whose at is the attempt's time, or whose held
// says until when ep is held back; the caller checks ctx.
func (d *Deliverer) attempt(ctx context.Context, ep Endpoint, m Message) result {
	res := result{at: d.now()}
	if err := safefetch.ValidateURL(ep.URL); err != nil {
		res.err = "the endpoint's url cannot be delivered to: " + err.Error()
		return res
	}
	tctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(tctx, http.MethodPost, ep.URL, bytes.NewReader(m.Body))
	if err != nil {
		res.err = "the endpoint's url cannot be delivered to: it cannot be used in a request"
		return res
	}
	if err := Sign(req.Header, ep, m, res.at); err != nil {
		res.err = "the delivery cannot be signed: the endpoint's secret is malformed; rotate it"
		return res
	}
	// The breaker is the endpoint's at its host: whether another account's endpoint
	// on the same host answers says nothing of this one (a receiving platform routes
	// each path to its own customer's code), so one never holds back another.
	host := breakerKey(ep.ID, req.URL.Host)
	probe, until := d.hosts.admit(host, res.at)
	if !probe {
		res.held = until
		return res
	}
	answered := false
	defer func() {
		if ctx.Err() == nil {
			d.hosts.done(host, answered, res.at, d.now())
		} else {
			d.hosts.abandon(host)
		}
	}()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.userAgent)
	resp, err := d.client.Do(req)
	if err != nil {
		// A refusal says nothing of whether the endpoint answers, unless the time ran
		// out (a name server that does not answer holds an attempt as a host does).
		res.err, answered = d.requestError(ctx, tctx, err), refusal(err) && tctx.Err() == nil
		return res
	}
	answered = true
	defer resp.Body.Close()
	res.status = resp.StatusCode
	res.retryAfter = resp.Header.Get("Retry-After")
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return res // delivered, whatever happened to the rest of the answer
	}
	res.err = "the endpoint answered " + statusText(resp.StatusCode)
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		res.err += ", a redirect, which is not followed: give the endpoint the url it redirects to"
		if loc := resp.Header.Get("Location"); loc != "" {
			res.err += " (" + strconv.Quote(cleantext.Message(loc)) + ")"
		}
		return res
	}
	if text := strings.TrimSpace(cleantext.Message(string(answer))); text != "" {
		res.err += ": " + text
	} else if readErr != nil && tctx.Err() != nil && ctx.Err() == nil {
		res.err += ", and did not send its answer's body within " + d.timeout.String()
	}
	return res
}

// refusal reports whether err is the address policy's refusal: an attempt that did
// not reach the host.
func refusal(err error) bool {
	var e *safefetch.Error
	return errors.As(err, &e)
}

// requestError describes err, the failure of a request made under tctx (ctx with the
// deliverer's timeout), without repeating what the network said.
func (d *Deliverer) requestError(ctx, tctx context.Context, err error) string {
	var refused *safefetch.Error
	var certErr *tls.CertificateVerificationError
	var opErr *net.OpError
	var errno syscall.Errno
	switch {
	case errors.As(err, &refused):
		return refusedDestination
	case ctx.Err() == nil && tctx.Err() != nil:
		return "the endpoint did not answer within " + d.timeout.String()
	case errors.As(err, &certErr):
		return "the endpoint's tls certificate is not valid; give it a valid certificate"
	case errors.As(err, &opErr) && opErr.Op == "dial" && errors.As(err, &errno):
		return "could not connect to the endpoint: " + errno.Error()
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "could not connect to the endpoint"
	}
	return "the connection to the endpoint failed"
}

// statusText returns "404 Not Found", or the bare code of a status without a name.
func statusText(code int) string {
	return strings.TrimSpace(strconv.Itoa(code) + " " + http.StatusText(code))
}

// cutError returns s cut to MaxError bytes at a character boundary, ending with "..."
// if it was cut.
func cutError(s string) string {
	if len(s) <= MaxError {
		return s
	}
	cut := MaxError - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// hostCooldown is how long a deliverer makes no attempt at an endpoint that did not
// answer, after which it makes one at a time until one is answered.
const hostCooldown = 30 * time.Second

// maxBreakers bounds the endpoints a deliverer remembers as not answering; past it,
// those whose cooldown has passed are forgotten, then those that failed quickly.
const maxBreakers = 10_000

// slowFailure is how long an attempt that failed without an answer must have held its
// place for its endpoint's hold to be kept however many others fail: so many such
// attempts can start within a cooldown, each on one of at most MaxConcurrency places,
// that their holds fit in maxBreakers (see breakers.forget).
const slowFailure = time.Second

// breakerKey returns the key of the breaker of the endpoint id at host (the URL's
// host and port): an endpoint moved to another host starts afresh.
func breakerKey(id, host string) string { return id + "\x00" + host }

// breakers remembers the endpoints that did not answer an attempt lately, each by its
// breakerKey (named a host below, for short): while one's cooldown runs, no attempt is
// made at it; after, one at a time until one is answered. It holds at most
// maxBreakers, each of a key of an endpoint's ID and a host name, so at most a few
// megabytes.
type breakers struct {
	cooldown time.Duration
	mu       sync.Mutex
	hosts    map[string]*breaker
}

// A breaker is the state of an endpoint that did not answer.
type breaker struct {
	since   time.Time // when it last did not answer
	probing bool      // an attempt at it is in flight
	slow    bool      // the attempt that did not answer took slowFailure or longer
}

func newBreakers(cooldown time.Duration) *breakers {
	return &breakers{cooldown: cooldown, hosts: make(map[string]*breaker)}
}

// admit reports whether an attempt at host may be made at now, and if not until when
// the host is held back: the end of its cooldown, or, while an attempt probes it after
// the cooldown, a cooldown from now. An admitted attempt must be followed by done or
// abandon.
func (b *breakers) admit(host string, now time.Time) (ok bool, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.hosts[host]
	switch {
	case br == nil:
		return true, time.Time{}
	case now.Before(br.since.Add(b.cooldown)):
		return false, br.since.Add(b.cooldown)
	case br.probing:
		return false, now.Add(b.cooldown)
	}
	br.probing = true
	return true, time.Time{}
}

// done tells how an admitted attempt at host, made at at, ended at now: answered or
// not.
func (b *breakers) done(host string, answered bool, at, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if answered {
		delete(b.hosts, host)
		return
	}
	br := b.hosts[host]
	if br == nil {
		if len(b.hosts) >= maxBreakers {
			b.forget(at)
		}
		br = &breaker{}
		b.hosts[host] = br
	}
	br.since, br.probing, br.slow = at, false, now.Sub(at) >= slowFailure
}

// abandon tells that an admitted attempt at host ended without telling anything.
func (b *breakers) abandon(host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br := b.hosts[host]; br != nil {
		br.probing = false
	}
}

// forget forgets the hosts whose cooldown passed at now, and no attempt is at; and,
// if that leaves more than nine tenths of maxBreakers, others no attempt is at whose
// attempt failed quickly (each is then tried once more before its cooldown's end,
// which costs its place little), so that a deliverer remembers at most maxBreakers
// however many endpoints fail at once, and forgets seldom.
//
// The holds of the endpoints that held their places long (a host that does not
// answer until the timeout) are kept: those an attempt is at are at most the
// deliverer's concurrency, and the others within their cooldown at most as many
// attempts of slowFailure or longer as can start within a cooldown on that many
// places, which is less than nine tenths of maxBreakers. So however many endpoints
// that fail at once anyone makes, they cannot push out the holds that save the
// places: they only push out each other's. (Should a clock that jumps leave more,
// the others no attempt is at go too, to keep the bound.)
func (b *breakers) forget(now time.Time) {
	for host, br := range b.hosts {
		if !br.probing && !now.Before(br.since.Add(b.cooldown)) {
			delete(b.hosts, host)
		}
	}
	for _, slowToo := range []bool{false, true} {
		for host, br := range b.hosts {
			if len(b.hosts) < maxBreakers*9/10 {
				return
			}
			if !br.probing && (slowToo || !br.slow) {
				delete(b.hosts, host)
			}
		}
	}
}
