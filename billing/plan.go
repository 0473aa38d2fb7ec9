package billing

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// A Plan fixes what an account may spend and how fast: the credits of each period, its
// rate limit and its concurrency ceiling, shared by all the account's keys.
type Plan struct {
	// Name identifies the plan ("free", "pro").
	Name string `json:"name"`
	// Credits is the allowance of each period: what is left of it lapses when the
	// period ends, and the allowance is renewed to Credits (at the first operation on
	// the balance after the end). Credits granted or bought
	// (accounts.Manager.AdjustCredits) carry over from period to period until they
	// are spent or lapse; calls spend the allowance first.
	Credits int64 `json:"credits"`
	// Renews is how often the allowance renews: [Monthly] (the default, when empty) or
	// [Yearly]. An account's periods are counted from its billing anchor (see
	// [PeriodAt]).
	Renews Cycle `json:"renews,omitempty"`
	// RatePerMinute is the sustained number of calls per minute; 0 means unlimited.
	RatePerMinute int `json:"rate_per_minute"`
	// Burst is how many calls may arrive at once after a quiet period; 0 means
	// RatePerMinute, so that a full minute's calls can come together.
	Burst int `json:"burst,omitempty"`
	// Concurrency is the number of calls that may run at the same time; 0 means
	// unlimited.
	Concurrency int `json:"concurrency"`
	// GraphQLMaxAPIs is the number of distinct APIs one GraphQL query may name; 0 means
	// no cap beyond the gateway's complexity limits. Free plans usually allow 1, paid
	// ones at least 10.
	GraphQLMaxAPIs int `json:"graphql_max_apis"`
	// BatchMaxItems is the number of items one batch request may hold (many inputs
	// through one API in one request); 0 means [DefaultBatchMaxItems], and it is at
	// most [MaxBatchItems]. Free plans usually allow 10, paid ones 100. Each item is
	// one rate-limit event, and a batch is admitted or refused whole, so a plan with a
	// rate limit holds a batch to its burst as well (see [Plan.BatchItems]).
	BatchMaxItems int `json:"batch_max_items"`
}

// DefaultBatchMaxItems is the number of items a batch may hold on a plan that leaves
// [Plan.BatchMaxItems] 0.
const DefaultBatchMaxItems = 100

// MaxBatchItems bounds [Plan.BatchMaxItems]: a batch is read, validated and answered
// as one request.
const MaxBatchItems = 1000

// BatchItems returns the most items one batch may hold on the plan: BatchMaxItems (or
// DefaultBatchMaxItems when it is 0), and no more than the rate limit's burst, which a
// batch larger could never pass.
func (p Plan) BatchItems() int {
	n := p.BatchMaxItems
	if n <= 0 {
		n = DefaultBatchMaxItems
	}
	if l, ok := p.RateLimit(); ok {
		n = min(n, l.Burst)
	}
	return n
}

// Cycle returns how often the plan's allowance renews: Renews, or [Monthly] when it is
// empty.
func (p Plan) Cycle() Cycle {
	if p.Renews == "" {
		return Monthly
	}
	return p.Renews
}

// RateLimit returns the plan's rate limit, and false if it has none.
func (p Plan) RateLimit() (Limit, bool) {
	if p.RatePerMinute <= 0 {
		return Limit{}, false
	}
	burst := p.Burst
	if burst <= 0 {
		burst = p.RatePerMinute
	}
	return Limit{Rate: p.RatePerMinute, Per: time.Minute, Burst: burst}, true
}

func (p Plan) check() error {
	switch {
	case p.Name == "" || len(p.Name) > 64:
		return errors.New("a plan needs a name of 1 to 64 characters")
	case p.Credits < 0:
		return fmt.Errorf("plan %q: credits cannot be negative", p.Name)
	case p.Credits > MaxCredits:
		return fmt.Errorf("plan %q: credits cannot pass the maximum of %d", p.Name, int64(MaxCredits))
	case p.RatePerMinute < 0, p.Burst < 0, p.Concurrency < 0, p.GraphQLMaxAPIs < 0:
		return fmt.Errorf("plan %q: limits cannot be negative (0 means unlimited)", p.Name)
	case p.BatchMaxItems < 0 || p.BatchMaxItems > MaxBatchItems:
		return fmt.Errorf("plan %q: batch_max_items must be between 1 and %d (0 means %d)", p.Name, MaxBatchItems, DefaultBatchMaxItems)
	}
	if err := p.Renews.check(); err != nil {
		return fmt.Errorf("plan %q: %w", p.Name, err)
	}
	// GCRA divides by the emission interval and keeps Burst intervals in int64
	// nanoseconds next to a Unix timestamp: the interval must be at least 1ns and the
	// time to refill the bucket must not overflow.
	if l, ok := p.RateLimit(); ok {
		if e := int64(l.Interval()); e == 0 || int64(l.Burst) > int64(maxRefill)/e {
			return fmt.Errorf("plan %q: rate limit out of range: %d calls per minute with a burst of %d (0 means unlimited)",
				p.Name, p.RatePerMinute, l.Burst)
		}
	}
	return nil
}

// maxRefill bounds the time a rate limit's bucket takes to refill, Burst emission
// intervals, so that GCRA's timestamps stay within int64 nanoseconds.
const maxRefill = 100 * 365 * 24 * time.Hour

// Plans is an immutable set of plans, looked up by name. It is configuration: every
// instance of a deployment is given the same plans.
type Plans struct {
	byName map[string]Plan
}

// NewPlans checks the plans and returns them as a set. Names must be unique.
func NewPlans(plans ...Plan) (*Plans, error) {
	ps := &Plans{byName: make(map[string]Plan, len(plans))}
	for _, p := range plans {
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("billing: %w", err)
		}
		if _, dup := ps.byName[p.Name]; dup {
			return nil, fmt.Errorf("billing: plan %q is defined twice", p.Name)
		}
		ps.byName[p.Name] = p
	}
	return ps, nil
}

// Lookup returns the plan with the given name.
func (ps *Plans) Lookup(name string) (Plan, bool) {
	p, ok := ps.byName[name]
	return p, ok
}

// All returns the plans, sorted by name.
func (ps *Plans) All() []Plan {
	all := make([]Plan, 0, len(ps.byName))
	for _, n := range ps.Names() {
		all = append(all, ps.byName[n])
	}
	return all
}

// Names returns the plans' names, sorted.
func (ps *Plans) Names() []string {
	names := make([]string, 0, len(ps.byName))
	for n := range ps.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
