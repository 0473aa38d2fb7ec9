package billing

import (
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
)

// The values the service's meter and its stores exchange, named here for the users
// of billing. Store authors find them, with the interfaces they implement, in package
// driver.
type (
	// Balance is an account's credits in the current period (see [driver.Balance]).
	Balance = driver.Balance
	// Parts divides credits between the allowance and the grants (see [driver.Parts]).
	Parts = driver.Parts
	// Period is a credit period (see [driver.Period]).
	Period = driver.Period
	// Limit is a rate limit (see [driver.Limit]).
	Limit = driver.Limit
	// RateDecision is a rate limiter's decision on one call (see [driver.RateDecision]).
	RateDecision = driver.RateDecision
	// RequestID identifies a call across instances (see [driver.RequestID]).
	RequestID = driver.RequestID
	// KeyCheck names the key an admission verifies (see [driver.KeyCheck]).
	KeyCheck = driver.KeyCheck
)

// MaxCredits bounds every balance, grant and refund (see [driver.MaxCredits]).
const MaxCredits = driver.MaxCredits

// The errors of the credits, as the stores report them (see package driver).
var (
	// ErrInsufficientCredits: the balance does not cover the call.
	ErrInsufficientCredits = driver.ErrInsufficientCredits
	// ErrVoided: the reservation expired and was voided before it was settled.
	ErrVoided = driver.ErrVoided
	// ErrTooManyCredits: a grant would take the balance past MaxCredits.
	ErrTooManyCredits = driver.ErrTooManyCredits
	// ErrTooManyGrants: a grant would give the account more lots than
	// driver.MaxGrantLots.
	ErrTooManyGrants = driver.ErrTooManyGrants
)

// MonthOf returns the calendar month (UTC) that t falls in: the credit period of an
// account on a monthly plan with no billing anchor ([PeriodAt] with the zero anchor).
func MonthOf(t time.Time) Period { return driver.MonthOf(t) }
