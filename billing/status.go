package billing

// Status is what an account's plan allows and what it has used, for the analytics
// endpoint.
type Status struct {
	Balance Balance
	// Usage counts the calls per API in the current period.
	Usage map[string]int64
	// Rate is what the rate limiter would decide now, meaningful when the plan has a
	// rate limit.
	Rate RateDecision
	// SlotsInUse is the number of calls running now, meaningful when the plan has a
	// concurrency ceiling.
	SlotsInUse int
}
