package webhook

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/store"
)

// The bounds that every [Store] keeps, besides those of the types.
const (
	// MaxID is the longest endpoint ID, message ID and account a store holds, in
	// bytes.
	MaxID = 256
	// MaxClaim is the most deliveries one [Store.Claim] leases.
	MaxClaim = 1000
	// DefaultLimit and MaxLimit bound a page of deliveries (see [Query]).
	DefaultLimit = 20
	MaxLimit     = 100
)

// The instants a store holds: from the Unix epoch to the last instant of Unix
// nanoseconds in an int64 (in 2262), so that every store keeps them to the nanosecond
// and orders them as numbers or as text of 20 digits.
var (
	minTime = time.Unix(0, 0).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// CheckTime returns an error wrapping store.ErrInvalid, naming what, unless t is an
// instant a store holds: from the Unix epoch (1970) to the year 2262. Every store checks
// the instants it is given (a now, a due time) with it.
func CheckTime(what string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("webhook: %s %s is out of range: give an instant from 1970 to 2262: %w",
			what, t.Format(time.RFC3339Nano), store.ErrInvalid)
	}
	return nil
}

// checkOptionalTime is CheckTime for an instant that may be zero.
func checkOptionalTime(what string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return CheckTime(what, t)
}

// CheckID returns an error wrapping store.ErrInvalid, naming what, unless id can be
// an endpoint's or a message's ID: text (store.CheckText) of 1 to [MaxID] bytes.
// Every store checks the IDs it is given with it, to store or to look up.
func CheckID(what, id string) error {
	if id == "" || len(id) > MaxID {
		return fmt.Errorf("webhook: %s: give 1 to %d bytes, got %d: %w", what, MaxID, len(id), store.ErrInvalid)
	}
	return store.CheckText("webhook: "+what, id)
}

// checkAccount checks an account: text of at most MaxID bytes, empty for the operator.
func checkAccount(what, account string) error {
	if len(account) > MaxID {
		return fmt.Errorf("webhook: %s: give at most %d bytes, got %d: %w", what, MaxID, len(account), store.ErrInvalid)
	}
	return store.CheckText("webhook: "+what, account)
}

// CheckAccount returns an error wrapping store.ErrInvalid unless account can be an
// endpoint's account: text of at most [MaxID] bytes, empty for the operator. Every
// store checks the account of [Store.Endpoints] with it.
func CheckAccount(account string) error { return checkAccount("account", account) }

// CheckEndpoint returns an error wrapping store.ErrInvalid that says what to fix,
// unless a store can hold e: an ID ([CheckID]), an account of at most [MaxID] bytes,
// at most [MaxTypes] types, every text valid UTF-8 without NUL bytes
// (store.CheckText), Created set, every instant in range ([CheckTime]), and a
// DisabledBy that is one of [DisabledByAccount], [DisabledByOperator] and
// [DisabledByDelivery], or empty, and empty while the endpoint is enabled (Disabled
// zero). It does not judge the URL or the secrets: that is the service's work, before
// it stores them.
func CheckEndpoint(e Endpoint) error {
	if err := CheckID("endpoint id", e.ID); err != nil {
		return err
	}
	if err := checkAccount("endpoint's account", e.Account); err != nil {
		return err
	}
	if len(e.Types) > MaxTypes {
		return fmt.Errorf("webhook: endpoint %q names %d event types; give at most %d: %w", e.ID, len(e.Types), MaxTypes, store.ErrInvalid)
	}
	for _, f := range []struct{ what, s string }{
		{"url", e.URL}, {"secret", e.Secret}, {"previous secret", e.PreviousSecret}, {"reason for disabling", e.DisabledReason},
	} {
		if err := store.CheckText("webhook: endpoint's "+f.what, f.s); err != nil {
			return err
		}
	}
	for _, t := range e.Types {
		if err := store.CheckText("webhook: endpoint's event type", t); err != nil {
			return err
		}
	}
	if e.Created.IsZero() {
		return fmt.Errorf("webhook: endpoint %q has no creation time (Created): %w", e.ID, store.ErrInvalid)
	}
	if err := checkDisabledBy(e); err != nil {
		return err
	}
	for _, f := range []struct {
		what string
		t    time.Time
	}{{"creation time", e.Created}, {"end of the previous secret", e.PreviousUntil}, {"time it was disabled", e.Disabled}} {
		if err := checkOptionalTime("endpoint's "+f.what, f.t); err != nil {
			return err
		}
	}
	return nil
}

// CheckMessage returns an error wrapping store.ErrInvalid that says what to fix,
// unless a store can hold m: an ID ([CheckID]), a type and an account that are text
// (store.CheckText; the account at most [MaxID] bytes), At set, a Body of at most
// [MaxBody] bytes, and every instant in range ([CheckTime]; Keep may be zero). The body
// is kept byte for byte: it is not checked as JSON.
func CheckMessage(m Message) error {
	if err := CheckID("message id", m.ID); err != nil {
		return err
	}
	if err := store.CheckText("webhook: message's type", m.Type); err != nil {
		return err
	}
	if err := checkAccount("message's account", m.Account); err != nil {
		return err
	}
	if len(m.Body) > MaxBody {
		return fmt.Errorf("webhook: message %q has a body of %d bytes; give at most %d: %w", m.ID, len(m.Body), MaxBody, store.ErrInvalid)
	}
	if m.At.IsZero() {
		return fmt.Errorf("webhook: message %q has no time (At): %w", m.ID, store.ErrInvalid)
	}
	if err := CheckTime("message's time", m.At); err != nil {
		return err
	}
	return checkOptionalTime("message's keep", m.Keep)
}

// CheckEnqueue returns an error wrapping store.ErrInvalid that says what to fix,
// unless a store can take an Enqueue of m for endpoints at now: m passes
// [CheckMessage], each endpoint [CheckID], and now [CheckTime].
func CheckEnqueue(m Message, endpoints []string, now time.Time) error {
	if err := CheckMessage(m); err != nil {
		return err
	}
	if err := CheckTime("now", now); err != nil {
		return err
	}
	for _, id := range endpoints {
		if err := CheckID("endpoint id", id); err != nil {
			return err
		}
	}
	return nil
}

// CheckOutcome returns o as a store keeps it, with its Attempt.Error cut to at most
// [MaxError] bytes at a character boundary and its Due zero unless it is Pending, or
// an error wrapping store.ErrInvalid that says what to fix: the endpoint's and
// message's IDs ([CheckID]), a claim that is text, a State that is one, for a Pending
// outcome a Due in range, and either an attempt (its time in range, a Status from 0 to
// 999, an Error that is text) or none (the zero Attempt) with a State other than
// Delivered.
func CheckOutcome(o Outcome) (Outcome, error) {
	if err := CheckID("endpoint id", o.Endpoint); err != nil {
		return Outcome{}, err
	}
	if err := CheckID("message id", o.Message); err != nil {
		return Outcome{}, err
	}
	if err := store.CheckText("webhook: claim", o.Claim); err != nil {
		return Outcome{}, err
	}
	switch o.State {
	case Pending:
		if err := CheckTime("due time of the next attempt", o.Due); err != nil {
			return Outcome{}, err
		}
	case Delivered, Failed:
	default:
		return Outcome{}, fmt.Errorf("webhook: outcome's state %d is none of pending, delivered and failed: %w", o.State, store.ErrInvalid)
	}
	if err := checkAttempt(o); err != nil {
		return Outcome{}, err
	}
	if o.Attempted() {
		o.Attempt.Error = cutAt(o.Attempt.Error, MaxError)
	} else {
		o.Attempt = Attempt{}
	}
	if o.State != Pending {
		o.Due = time.Time{}
	}
	return o, nil
}

// checkAttempt checks o's attempt, or that an outcome without one may be.
func checkAttempt(o Outcome) error {
	a := o.Attempt
	if !o.Attempted() {
		switch {
		case a.Status != 0 || a.Error != "":
			return fmt.Errorf("webhook: the attempt has a status or an error but no time (At): give its time, or the zero Attempt for none: %w", store.ErrInvalid)
		case o.State == Delivered:
			return fmt.Errorf("webhook: a delivered outcome has no attempt: give the attempt that delivered it (Attempt.At): %w", store.ErrInvalid)
		}
		return nil
	}
	if err := CheckTime("attempt's time", a.At); err != nil {
		return err
	}
	if a.Status < 0 || a.Status > 999 {
		return fmt.Errorf("webhook: the attempt's status %d is no HTTP status: give 0 to 999: %w", a.Status, store.ErrInvalid)
	}
	return store.CheckText("webhook: the attempt's error", a.Error)
}

// cutAt returns the longest prefix of s, valid UTF-8, of at most n bytes.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CheckSweepClaim returns an error wrapping store.ErrInvalid unless name, now and lease
// are those of a claim of a sweep ([Store.ClaimSweep]): name an ID ([CheckID]), lease
// positive and now+lease in range.
func CheckSweepClaim(name string, now time.Time, lease time.Duration) error {
	if err := CheckID("sweep's name", name); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("webhook: claim of sweep %q with a lease of %v: give a positive lease: %w", name, lease, store.ErrInvalid)
	}
	if err := CheckTime("claim's now", now); err != nil {
		return err
	}
	return CheckTime("end of the claim's lease", now.Add(lease))
}

// CheckSweepRecord returns an error wrapping store.ErrInvalid unless name, claim and
// position are those of a record of a sweep ([Store.RecordSweep]): name an ID, claim
// and position text, the position of at most [MaxPosition] bytes.
func CheckSweepRecord(name, claim, position string) error {
	if err := CheckID("sweep's name", name); err != nil {
		return err
	}
	if err := store.CheckText("webhook: claim", claim); err != nil {
		return err
	}
	if len(position) > MaxPosition {
		return fmt.Errorf("webhook: the position of sweep %q has %d bytes, more than %d: %w", name, len(position), MaxPosition, store.ErrInvalid)
	}
	return store.CheckText("webhook: sweep's position", position)
}

// CheckClaim returns an error wrapping store.ErrInvalid unless limit and lease are
// those of a claim: limit from 1 to [MaxClaim], lease positive and now+lease in range.
func CheckClaim(now time.Time, lease time.Duration, limit int) error {
	if limit < 1 || limit > MaxClaim {
		return fmt.Errorf("webhook: claim of %d deliveries: give 1 to %d: %w", limit, MaxClaim, store.ErrInvalid)
	}
	if lease <= 0 {
		return fmt.Errorf("webhook: claim with a lease of %v: give a positive lease: %w", lease, store.ErrInvalid)
	}
	if err := CheckTime("claim's now", now); err != nil {
		return err
	}
	return CheckTime("end of the claim's lease", now.Add(lease))
}

// CheckResend returns an error wrapping store.ErrInvalid that says what to fix,
// unless a store can take a Resend of message to endpoint at now: both IDs pass
// [CheckID], and now [CheckTime].
func CheckResend(endpoint, message string, now time.Time) error {
	if err := CheckID("endpoint id", endpoint); err != nil {
		return err
	}
	if err := CheckID("message id", message); err != nil {
		return err
	}
	return CheckTime("now", now)
}

// PageOf returns the page of a listing whose query's limit is limit (see
// [ParseQuery]), from the deliveries found in the listing's order, up to limit+1 of
// them: the first limit, and a Next naming the last of them if there were more.
func PageOf(found []Delivery, limit int) Page {
	if len(found) <= limit {
		return Page{Deliveries: found}
	}
	last := found[limit-1].Message
	return Page{Deliveries: found[:limit], Next: Position{At: last.At, Message: last.ID}.Cursor()}
}

// A Position is where a page of deliveries ends: the At and ID of its last delivery's
// message. The next page holds the deliveries after it.
type Position struct {
	At      time.Time
	Message string
}

// Cursor encodes p for [Page.Next]: the message's time, in Unix nanoseconds in base
// 36, a dot, and its ID in unpadded base64url.
func (p Position) Cursor() string {
	return strconv.FormatInt(p.At.UnixNano(), 36) + "." + base64.RawURLEncoding.EncodeToString([]byte(p.Message))
}

// Before reports whether a delivery of the message of time at and ID id comes after p
// in a listing, newest first: at before p.At, or at p.At and id before p.Message.
func (p Position) Before(at time.Time, id string) bool {
	return at.Before(p.At) || at.Equal(p.At) && id < p.Message
}

// ParseQuery checks q's Limit and Cursor, as every store does first: it returns the
// limit to use and the position the cursor names (ok false for none), or an error
// wrapping store.ErrInvalid ([ErrBadCursor] for the cursor).
func ParseQuery(q Query) (limit int, pos Position, ok bool, err error) {
	switch {
	case q.Limit < 0 || q.Limit > MaxLimit:
		return 0, Position{}, false, fmt.Errorf("webhook: limit %d is out of bounds: give 1 to %d, or 0 for %d: %w",
			q.Limit, MaxLimit, DefaultLimit, store.ErrInvalid)
	case q.Limit == 0:
		limit = DefaultLimit
	default:
		limit = q.Limit
	}
	if q.Cursor == "" {
		return limit, Position{}, false, nil
	}
	a, b, found := strings.Cut(q.Cursor, ".")
	ns, err := strconv.ParseInt(a, 36, 64)
	id, err2 := base64.RawURLEncoding.Strict().DecodeString(b)
	if !found || err != nil || err2 != nil || ns < 0 || CheckID("", string(id)) != nil {
		return 0, Position{}, false, ErrBadCursor
	}
	pos = Position{At: time.Unix(0, ns).UTC(), Message: string(id)}
	if pos.Cursor() != q.Cursor {
		// One position has one cursor: "+1" or "01" for 1 is none a listing returned.
		return 0, Position{}, false, ErrBadCursor
	}
	return limit, pos, true, nil
}

// checkDisabledBy refuses an endpoint's DisabledBy that is not one of the values a
// store holds, or that is set on an endpoint enabled.
func checkDisabledBy(e Endpoint) error {
	switch e.DisabledBy {
	case "":
		return nil
	case DisabledByAccount, DisabledByOperator, DisabledByDelivery:
		if e.Disabled.IsZero() {
			return fmt.Errorf("webhook: endpoint %q is enabled (Disabled zero) but says who disabled it (DisabledBy %q): clear DisabledBy when you enable it: %w",
				e.ID, e.DisabledBy, store.ErrInvalid)
		}
		return nil
	}
	shown := e.DisabledBy
	if len(shown) > MaxDisabledBy {
		shown = shown[:MaxDisabledBy] + "..."
	}
	return fmt.Errorf("webhook: endpoint %q: DisabledBy %q is none of %q, %q and %q (or empty): %w",
		e.ID, strings.ToValidUTF8(shown, "?"), DisabledByAccount, DisabledByOperator, DisabledByDelivery, store.ErrInvalid)
}
