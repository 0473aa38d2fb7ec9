package webhook

import (
	"container/heap"
	"hash/fnv"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The defaults of the shares of a [Deliverer]'s attempts (see [DelivererOptions]).
const (
	DefaultEndpointConcurrency = 2
	DefaultAccountConcurrency  = 4
	DefaultHostConcurrency     = 4
)

// MaxPark is the furthest ahead a [Deliverer] puts off a delivery that it gives back
// without an attempt (see [Deliverer], "Fair shares"): however long an endpoint's
// backlog, a delivery given back comes due again within MaxPark. The deliveries put
// off as far are spread over the whole of it, each at a place of its own.
const MaxPark = 5 * time.Minute

// minAttempt is the shortest a deliverer expects an attempt to take, for the pace of
// the deliveries it gives back: what it expects of an endpoint none of whose attempts
// has ended yet.
const minAttempt = 25 * time.Millisecond

// maxLanes bounds the lanes a deliverer remembers; past it, those with no attempt in
// flight are forgotten, the idle ones first.
const maxLanes = 10_000

// maxParks bounds the due times of the deliveries given back that a deliverer wakes up
// for; past it, it finds the others at its poll.
const maxParks = 1024

// lanes share a deliverer's attempts: each endpoint, the endpoints of each account,
// and the endpoints on each host are a lane, which takes a bounded number of attempts
// at once, and on which the deliveries over its share are given back, paced behind
// each other.
type lanes struct {
	timeout     time.Duration // an attempt's longest
	perEndpoint int           // the places of an endpoint's lane
	perAccount  int           // the places of an account's lane
	perHost     int           // the places of a host's lane
	mu          sync.Mutex
	m           map[string]*lane
	parks       parkHeap // the due times handed out, to claim their deliveries when due
}

// A lane is what a deliverer knows of the attempts at one endpoint, at the endpoints
// of one account, or at the endpoints on one host.
type lane struct {
	starts  []time.Time   // when each attempt in flight entered the lane
	owners  []string      // on a host's lane, the account of each attempt in flight
	took    time.Duration // how long the last attempt that ended took; 0 before one
	horizon time.Time     // the due time, before jitter, of the last delivery parked on it
	// account and host are the keys of an endpoint's account's lane and its host's,
	// once the deliverer read the endpoint: before an attempt at the endpoint ends,
	// theirs tell how long one may take.
	account, host string
}

func newLanes(timeout time.Duration, perEndpoint, perAccount, perHost int) *lanes {
	return &lanes{timeout: timeout, perEndpoint: perEndpoint, perAccount: perAccount, perHost: perHost, m: make(map[string]*lane)}
}

// endpointLane and accountLane return the keys of an endpoint's lane and an account's
// ("" is the operator's).
func endpointLane(id string) string     { return "e\x00" + id }
func accountLane(account string) string { return "a\x00" + account }

// hostLane returns the key of the lane of the host and port of rawURL, or "" if it
// names none (its attempt fails without a request). The host is written one way
// whatever its case, a trailing dot, a port left to its scheme's default, or an IP
// address's spelling, so that the endpoints on one host share one lane.
func hostLane(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().WithZone("").String()
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n) // "0443" is 443
	}
	return "h\x00" + net.JoinHostPort(host, port)
}

// lane returns the lane of key, made if there is none. The caller holds the lock.
func (ls *lanes) lane(key string, now time.Time) *lane {
	if l := ls.m[key]; l != nil {
		return l
	}
	if len(ls.m) >= maxLanes {
		ls.forget(now)
	}
	l := &lane{}
	ls.m[key] = l
	return l
}

// forget forgets the lanes with no attempt in flight: those whose horizon has passed,
// and if that leaves too many, the others too (their pace is lost, not an attempt).
// The caller holds the lock.
func (ls *lanes) forget(now time.Time) {
	for key, l := range ls.m {
		if len(l.starts) == 0 && !l.horizon.After(now) {
			delete(ls.m, key)
		}
	}
	for key, l := range ls.m {
		if len(ls.m) < maxLanes*9/10 {
			return
		}
		if len(l.starts) == 0 {
			delete(ls.m, key)
		}
	}
}

// enter takes a place for an attempt on the lane of key at now, if it has one free,
// and reports whether it did. A place taken must be given back with leave.
func (ls *lanes) enter(key string, now time.Time) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.lane(key, now)
	if len(l.starts) >= ls.limit(key) {
		return false
	}
	l.starts = append(l.starts, now)
	return true
}

// enterHost takes a place on the host's lane key at now for an attempt at an endpoint
// of the account whose lane is account, if the host has one free and the account
// holds fewer than all but one of the host's places (one, if the host has only one):
// so that one account alone never fills a host that others' endpoints share. It
// returns "" if it took one (to give back with leave), else the key of the lane to
// give the delivery back on: the host's, or the account's when the account holds its
// part of the host.
func (ls *lanes) enterHost(key, account string, now time.Time) (full string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.lane(key, now)
	if len(l.starts) >= ls.perHost {
		return key
	}
	mine := 0
	for _, a := range l.owners {
		if a == account {
			mine++
		}
	}
	if mine >= max(ls.perHost-1, 1) {
		return account
	}
	l.starts = append(l.starts, now)
	l.owners = append(l.owners, account)
	return ""
}

// owns tells that the endpoint whose lane is key is of the account whose lane is
// account, on the host whose lane is host ("" for none).
func (ls *lanes) owns(key, account, host string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[key]; l != nil {
		l.account, l.host = account, host
	}
}

// leave gives back the place on the lane of key taken at start (on a host's lane, by
// an attempt of the account whose lane is owner; "" on the others), by an attempt that
// took took; a negative took tells of no request made, which leaves the lane's pace.
func (ls *lanes) leave(key, owner string, start time.Time, took time.Duration) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[key]
	if l == nil {
		return
	}
	for i, s := range l.starts {
		if !s.Equal(start) || i < len(l.owners) && l.owners[i] != owner {
			continue
		}
		l.starts = append(l.starts[:i], l.starts[i+1:]...)
		if i < len(l.owners) {
			l.owners = append(l.owners[:i], l.owners[i+1:]...)
		}
		break
	}
	if took >= 0 {
		l.took = took
	}
}

// park returns when a delivery given back at now is due again, at or after atLeast:
// when the lane of key, which has no place for it, may have one, behind the
// deliveries parked on that lane before, and, for an endpoint's lane whose account is
// known, behind those parked on the account's lane, which it needs a place on too.
// (An account's lane is not held behind its endpoints': its deliveries would wait for
// the slowest of them. Nor is an endpoint's behind its host's, which other accounts'
// deliveries share: one account's backlog there would hold back everyone's.)
//
// The attempts in flight on a lane may end after the lane's expected attempt: the
// last one's length (for an endpoint none of whose attempts has ended, the longer of
// its account's and its host's), or twice as long as the oldest in flight has run, at
// least minAttempt and at most the timeout. The deliveries parked on a lane follow
// each other by step, or, for a zero step, by that expected attempt shared among the
// lane's places, each moved later by up to jitter (a fraction below 1; none for 0 or
// less) times r (in [0, 1)) of a step.
//
// The due time is at most MaxPark ahead. A delivery that would be further is spread
// over the window instead, at the first instant from when the lane may have a place
// whose remainder modulo MaxPark is phase (the delivery's own: see parkPhase), or, if
// that is more than MaxPark ahead, the one a MaxPark before (see atPhase): so the
// deliveries of a backlog given back together come due spread over the whole window,
// not together at its end, and each, given back again when it comes due, is due again
// a MaxPark later, at the same place, not sooner.
func (ls *lanes) park(key string, now, atLeast time.Time, step time.Duration, jitter, r float64, phase time.Duration) time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.lane(key, now)
	expect := ls.expect(l, now)
	if step <= 0 {
		step = expect / time.Duration(ls.limit(key))
	}
	first := now.Add(expect) // when the lane may have a place
	if atLeast.After(first) {
		first = atLeast
	}
	due := first
	if behind := l.horizon.Add(step); l.horizon.After(now) && behind.After(due) {
		due = behind
	}
	if a := ls.m[l.account]; a != nil && a.horizon.After(due) {
		due = a.horizon
	}
	far := now.Add(MaxPark)
	var moved time.Time
	switch {
	case due.After(far):
		due = far
		moved = atPhase(earliest(first, far), far, phase)
	case jitter > 0:
		moved = earliest(due.Add(time.Duration(jitter*r*float64(step))), far)
	default:
		moved = due
	}
	l.horizon = due
	if len(ls.parks) < maxParks {
		heap.Push(&ls.parks, moved)
	}
	return moved
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// atPhase returns the first instant from lo whose remainder modulo MaxPark is phase,
// if it is not after hi (lo's MaxPark ahead at most), else the one a MaxPark before
// it, which is after hi's MaxPark before: so the instants of phases spread evenly are
// spread evenly over the MaxPark up to hi. (A delivery given one before lo comes due
// before its lane may have a place for it: it is given back once more, then due at
// its phase a MaxPark later, from when it has one.)
func atPhase(lo, hi time.Time, phase time.Duration) time.Time {
	window := int64(MaxPark)
	off := (int64(phase) - lo.UnixNano()%window) % window
	if off < 0 {
		off += window
	}
	t := lo.Add(time.Duration(off))
	if t.After(hi) {
		t = t.Add(-MaxPark)
	}
	return t
}

// parkPhase returns the place in MaxPark of the delivery of message to endpoint (see
// park): the same for every deliverer and every time it is given back, spread evenly
// over the deliveries.
func parkPhase(endpoint, message string) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(endpoint))
	h.Write([]byte{0})
	h.Write([]byte(message))
	return time.Duration(h.Sum64() % uint64(MaxPark))
}

// expect returns how long an attempt on l may take, as seen at now (see park). The
// caller holds the lock.
func (ls *lanes) expect(l *lane, now time.Time) time.Duration {
	expect := max(l.took, minAttempt)
	if l.took == 0 {
		for _, k := range []string{l.account, l.host} {
			if o := ls.m[k]; o != nil {
				expect = max(expect, o.took)
			}
		}
	}
	for _, s := range l.starts {
		expect = max(expect, 2*now.Sub(s))
	}
	return min(expect, ls.timeout)
}

// limit returns the places of the lane of key.
func (ls *lanes) limit(key string) int {
	switch {
	case strings.HasPrefix(key, "a\x00"):
		return ls.perAccount
	case strings.HasPrefix(key, "h\x00"):
		return ls.perHost
	}
	return ls.perEndpoint
}

// next returns the earliest due time handed out that is after since (when the
// deliverer last claimed: it claimed the deliveries due then), and false if there is
// none.
func (ls *lanes) next(since time.Time) (time.Time, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for len(ls.parks) > 0 && !ls.parks[0].After(since) {
		heap.Pop(&ls.parks)
	}
	if len(ls.parks) == 0 {
		return time.Time{}, false
	}
	return ls.parks[0], true
}

// parkHeap is a min-heap of due times.
type parkHeap []time.Time

func (h parkHeap) Len() int           { return len(h) }
func (h parkHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h parkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *parkHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *parkHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
