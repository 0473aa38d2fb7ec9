package webhook

import (
	"container/heap"
	"strings"
	"sync"
	"time"
)

// The defaults of the shares of a [Deliverer]'s attempts (see [DelivererOptions]).
const (
	DefaultEndpointConcurrency = 2
	DefaultAccountConcurrency  = 4
)

// MaxPark is the furthest ahead a [Deliverer] puts off a delivery that it gives back
// without an attempt (see [Deliverer], "Fair shares"): however long an endpoint's
// backlog, a delivery given back comes due again within MaxPark.
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

// lanes share a deliverer's attempts: each endpoint, and the endpoints of each
// account, are a lane, which takes a bounded number of attempts at once, and on which
// the deliveries over its share are given back, paced behind each other.
type lanes struct {
	timeout     time.Duration // an attempt's longest
	perEndpoint int           // the places of an endpoint's lane
	perAccount  int           // the places of an account's lane
	mu          sync.Mutex
	m           map[string]*lane
	parks       parkHeap // the due times handed out, to claim their deliveries when due
}

// A lane is what a deliverer knows of the attempts at one endpoint, or at the
// endpoints of one account.
type lane struct {
	starts  []time.Time   // when each attempt in flight entered the lane
	took    time.Duration // how long the last attempt that ended took; 0 before one
	horizon time.Time     // the due time, before jitter, of the last delivery parked on it
	// account is the key of an endpoint's account's lane, once the deliverer read the
	// endpoint: before an attempt at the endpoint ends, its account's tell how long
	// one may take.
	account string
}

func newLanes(timeout time.Duration, perEndpoint, perAccount int) *lanes {
	return &lanes{timeout: timeout, perEndpoint: perEndpoint, perAccount: perAccount, m: make(map[string]*lane)}
}

// endpointLane and accountLane return the keys of an endpoint's lane and an account's
// ("" is the operator's).
func endpointLane(id string) string     { return "e\x00" + id }
func accountLane(account string) string { return "a\x00" + account }

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

// owns tells that the endpoint whose lane is key is of the account whose lane is
// account.
func (ls *lanes) owns(account, key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.m[key]; l != nil {
		l.account = account
	}
}

// leave gives back the place on the lane of key taken at start, by an attempt that
// took took; a negative took tells of no request made, which leaves the lane's pace.
func (ls *lanes) leave(key string, start time.Time, took time.Duration) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.m[key]
	if l == nil {
		return
	}
	for i, s := range l.starts {
		if s.Equal(start) {
			l.starts = append(l.starts[:i], l.starts[i+1:]...)
			break
		}
	}
	if took >= 0 {
		l.took = took
	}
}

// park returns when a delivery given back at now is due again, at or after atLeast:
// when the lane of key, which has no place for it, may have one, behind the
// deliveries parked on that lane before, and, for an endpoint's lane whose account is
// known, behind those parked on the account's lane, which it needs a place on too.
// (An account's lane is not held behind its endpoints': its deliveries would wait
// for the slowest of them.)
//
// The attempts in flight on a lane may end after the lane's expected attempt: the
// last one's length (for an endpoint none of whose attempts has ended, its
// account's), or twice as long as the oldest in flight has run, at least minAttempt
// and at most the timeout. The deliveries parked on a lane follow each other by step,
// or, for a zero step, by that expected attempt shared among the lane's places. The
// due time is at most MaxPark ahead: the deliveries parked beyond it come due in
// MaxPark's last jitter-th part. Otherwise it is moved later by up to jitter (a
// fraction below 1; none for 0 or less) times r (in [0, 1)) of a step.
func (ls *lanes) park(key string, now, atLeast time.Time, step time.Duration, jitter, r float64) time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.lane(key, now)
	expect := ls.expect(l, now)
	if step <= 0 {
		step = expect / time.Duration(ls.limit(key))
	}
	due := now.Add(expect)
	if behind := l.horizon.Add(step); l.horizon.After(now) && behind.After(due) {
		due = behind
	}
	if a := ls.m[l.account]; a != nil && a.horizon.After(due) {
		due = a.horizon
	}
	if atLeast.After(due) {
		due = atLeast
	}
	far := now.Add(MaxPark)
	var moved time.Time
	switch {
	case due.After(far):
		due = far
		moved = due
		if jitter > 0 {
			moved = due.Add(-time.Duration(jitter * r * float64(MaxPark)))
		}
	case jitter > 0:
		moved = due.Add(time.Duration(jitter * r * float64(step)))
	default:
		moved = due
	}
	l.horizon = due
	if len(ls.parks) < maxParks {
		heap.Push(&ls.parks, moved)
	}
	return moved
}

// expect returns how long an attempt on l may take, as seen at now (see park). The
// caller holds the lock.
func (ls *lanes) expect(l *lane, now time.Time) time.Duration {
	expect := max(l.took, minAttempt)
	if a := ls.m[l.account]; l.took == 0 && a != nil {
		expect = max(expect, a.took)
	}
	for _, s := range l.starts {
		expect = max(expect, 2*now.Sub(s))
	}
	return min(expect, ls.timeout)
}

// limit returns the places of the lane of key.
func (ls *lanes) limit(key string) int {
	if strings.HasPrefix(key, "a\x00") {
		return ls.perAccount
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
