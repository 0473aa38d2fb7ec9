// Package billing says what an account may spend and how fast, and names the values of
// its credits. A [Plan] fixes an account's credits for each period, its rate limit and
// its concurrency ceiling, shared by all the account's keys; [Plans] is the set of plans
// a deployment is configured with. A call is one rate-limit event, or several for a batch
// of calls ([Plan.BatchItems]), allowed or refused together.
//
// The service (package tollgate) enforces the plans: it admits each call (checks the
// rate limit, takes a concurrency slot, reserves the credits) and settles it when it
// ends (keeps the charge, or refunds what failed on the service's side, and frees the
// slot). That policy is internal to the service; what it reports is named here: an
// account's [Balance] in its credit [Period], a rate limiter's
// [RateDecision], the [Status] of the analytics, and the errors of the credits
// ([ErrInsufficientCredits], [ErrVoided], [ErrTooManyCredits]).
//
// The stores keep the state, in one process (store/memory) or shared by many
// (store/postgres, store/redis). Their contract, the interfaces a store implements
// ([driver.Ledger], [driver.RateLimiter], [driver.ConcurrencyLimiter], and the optional
// [driver.Admitter] and [driver.Sweeper]) and the values they exchange, is package
// [driver], as database/sql's is database/sql/driver: users of billing never need it,
// store authors need nothing else (and store/storetest, which checks an
// implementation). A key store that can check a cached key in the same step as an
// admission implements [driver.KeyChecker].
//
// # Periods
//
// An account's allowance (its plan's Credits) renews at the start of each of its
// periods, monthly or yearly as its plan renews ([Plan.Renews]). The periods are
// counted from the account's billing anchor, by default the instant it was created:
// [PeriodAt] returns the period that contains an instant, and periods tile time
// without gaps or overlaps. An account anchored on January 31 renews on February 28
// (29 in a leap year), March 31, April 30, and so on; one with no anchor (created
// before anchors existed) renews on the first of each calendar month, in UTC.
//
// A change of plan that waits for the renewal ([Terms]) takes effect at the end of the
// period it was made in: the new plan's allowance is the next period's. A change to
// a plan that renews on another cycle (monthly to yearly) begins the new cycle at that
// instant. [Plans.At] returns the plan in force at an instant and the period that
// holds it. No change of plan moves a period backwards. Renewal is lazy: the ledger
// renews the allowance at the first operation given a period that begins later than
// the one it holds.
//
// # Reservations
//
// The credits of a call are reserved when it is admitted, until an expiry: its
// timeout plus a grace (the Service's Options.ReservationGrace). A reservation ends
// exactly once: settled when the call ends, or voided, its credits given back and its
// calls uncounted, if it is still open at its expiry (the instance died, the store was
// down); a settlement that arrives after the void gets [ErrVoided]. So an outage or a
// crash errs in the customer's favour, never against them: a call whose charge could
// not be written before its reservation expired is not charged. [driver.Reservation]
// and [driver.Ledger] state the rules every store keeps.
//
// # Bounds
//
// Balances, grants and refunds stay within [MaxCredits], 2^53-1, which every JSON
// client reads exactly: a ledger keeps an account's remaining plus used credits at or
// below it, and refuses a grant that would pass it with [ErrTooManyCredits].
package billing
