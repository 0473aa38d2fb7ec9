package safefetch

import (
	"fmt"
	"net/url"
	"unicode/utf8"
)

// Reason classifies why a check or fetch failed.
type Reason int

// The reasons an [Error] can carry.
const (
	// ReasonBadURL means the URL is malformed, too long, has no host, has an
	// invalid port or carries credentials.
	ReasonBadURL Reason = iota + 1
	// ReasonScheme means the URL, or a redirect, uses a scheme other than
	// http or https.
	ReasonScheme
	// ReasonBlocked means the host is, or resolves to, an address that is not
	// a public internet address (see [Blocked]). For a host name, the message
	// does not tell it from ReasonNetwork's.
	ReasonBlocked
	// ReasonTooManyRedirects means the server redirected more often than
	// [Options.MaxRedirects] allows.
	ReasonTooManyRedirects
	// ReasonTooLarge means the file is larger than the size cap.
	ReasonTooLarge
	// ReasonTimeout means the fetch, or the caller's context, ran out of time,
	// or that a check's host name was not resolved within the timeout.
	ReasonTimeout
	// ReasonStatus means the final response status was not 2xx.
	ReasonStatus
	// ReasonNetwork means the host could not be resolved or connected to, or
	// the connection failed. A host name that cannot be resolved gets the
	// message of ReasonBlocked.
	ReasonNetwork
	// ReasonCanceled means the caller's context was canceled.
	ReasonCanceled
)

// String returns a short lowercase name for the reason, for logs and metrics.
func (r Reason) String() string {
	switch r {
	case ReasonBadURL:
		return "bad url"
	case ReasonScheme:
		return "scheme"
	case ReasonBlocked:
		return "blocked"
	case ReasonTooManyRedirects:
		return "too many redirects"
	case ReasonTooLarge:
		return "too large"
	case ReasonTimeout:
		return "timeout"
	case ReasonStatus:
		return "status"
	case ReasonNetwork:
		return "network"
	case ReasonCanceled:
		return "canceled"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// Error is the only error type returned by [Fetcher.Check],
// [Fetcher.CheckAll] and [Fetcher.Fetch]. Its message is meant for the user who supplied the URL: it
// names the URL and says what to change. It never contains response bodies or
// the addresses a host name resolved to, nor says why a host name was refused
// (see the package documentation).
type Error struct {
	// Reason classifies the failure.
	Reason Reason
	// URL is the URL as the caller gave it, with any credentials replaced by
	// "xxxxx" and shortened if very long. It may be empty.
	URL string
	// StatusCode is the final HTTP status when Reason is ReasonStatus, and
	// zero otherwise.
	StatusCode int

	msg    string // what went wrong and what to do, without the URL
	target string // the redirect target the failure happened at, if known
	err    error  // the underlying cause, if any
}

// Error returns the message, prefixed with the quoted URL when it is known.
func (e *Error) Error() string {
	if e.URL == "" {
		return e.msg
	}
	return fmt.Sprintf("url %q: %s", e.URL, e.msg)
}

// Unwrap returns the underlying cause, such as a *net.OpError, or nil. The
// cause is for logs: its text may say more than should be shown to users.
func (e *Error) Unwrap() error { return e.err }

// newError returns an *Error without a URL; the public entry points add it.
func newError(reason Reason, cause error, format string, args ...any) *Error {
	return &Error{Reason: reason, msg: fmt.Sprintf(format, args...), err: cause}
}

// forURL returns a copy of e naming rawURL, the URL the caller asked for. If
// the failure happened at a redirect target other than firstURL (rawURL as
// the first request sent it), the message says so.
func (e *Error) forURL(rawURL, firstURL string) *Error {
	c := *e
	c.URL = displayURL(rawURL)
	// A redirect limit is not a fault of any one target, so none is named.
	if c.target != "" && c.target != firstURL && c.Reason != ReasonTooManyRedirects {
		c.msg = fmt.Sprintf("redirected to %q: %s", displayURL(c.target), c.msg)
	}
	c.target = ""
	return &c
}

// maxDisplayURL bounds how much of a URL an error message repeats.
const maxDisplayURL = 200

// displayURL returns raw with credentials masked, shortened to about
// maxDisplayURL bytes.
func displayURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User("xxxxx")
		raw = u.String()
	}
	if len(raw) <= maxDisplayURL {
		return raw
	}
	cut := maxDisplayURL
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return raw[:cut] + "..."
}
