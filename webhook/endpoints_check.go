package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/tollgate-dev/tollgate/internal/outage"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
	"github.com/tollgate-dev/tollgate/store"
)

// MaxURLLength is the longest endpoint URL, in bytes.
const MaxURLLength = 2048

// An Error is a refusal of [Endpoints]: its message says what is wrong and what to do,
// for people (it begins with the name of the field at fault, when one is), and never
// names an implementation. errors.Is tells its kind, Kind: store.ErrInvalid (a value to
// fix), store.ErrNotFound (no such endpoint or delivery of the account),
// store.ErrConflict (the endpoint is disabled, the owner has [MaxEndpoints]
// endpoints, ...) or store.ErrUnavailable (a store failed; try again).
type Error struct {
	Kind    error
	Message string
	// Err is the cause, for the logs; nil for none.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the kind and the cause.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// invalid is the refusal of a value to fix, msg saying which and how.
func invalid(msg string) *Error { return &Error{Kind: store.ErrInvalid, Message: msg} }

// storeError is the error of a store that failed with err while serving ctx, doing
// what: logged once as internal/outage judges it, and answered with its words.
func (m *Endpoints) storeError(ctx context.Context, what string, err error) *Error {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e
	}
	v := outage.Judge(ctx, err)
	m.log.Log(ctx, v.Level, v.Log, "store", "webhooks", "doing", what, "error", err)
	if v.Invalid {
		return &Error{Kind: store.ErrInvalid, Message: v.Message, Err: err}
	}
	return &Error{Kind: store.ErrUnavailable, Message: v.Message, Err: err}
}

// checkURL refuses a URL that no endpoint may have (see [Endpoints.Create]), with a
// message that begins "url".
func checkURL(raw string, allowPrivate bool) error {
	const example = "give an absolute http or https URL, such as https://example.com/webhooks"
	switch {
	case raw == "":
		return invalid("url is required: " + example)
	case len(raw) > MaxURLLength:
		return invalid(fmt.Sprintf("url is %d bytes long: give at most %d", len(raw), MaxURLLength))
	case strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\uFFFD' }):
		return invalid("url contains a space, a control character or a byte that is not UTF-8: percent-encode it")
	case strings.Contains(raw, "#"):
		return invalid("url has a fragment (#...), which is never sent: remove it")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return invalid("url cannot be parsed: " + example)
	case u.Scheme == "":
		return invalid("url is not absolute: " + example)
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid(fmt.Sprintf("url has the scheme %q: %s", u.Scheme, example))
	case u.Opaque != "":
		return invalid("url has no host (write the scheme with //): " + example)
	case u.User != nil:
		return invalid("url has a user name or password: remove it; a receiver authenticates deliveries by their signature")
	case u.Hostname() == "":
		return invalid("url has no host: " + example)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return invalid(fmt.Sprintf("url has the port %q: give a port from 1 to 65535, or none", p))
		}
	}
	return checkHost(u.Hostname(), allowPrivate)
}

// checkHost refuses a host that is not a public internet address whatever the DNS says
// (unless allowPrivate), or that is neither a name nor an IP address.
func checkHost(host string, allowPrivate bool) error {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		name := strings.ToLower(strings.TrimSuffix(host, "."))
		labels := strings.Split(name, ".")
		if last := labels[len(labels)-1]; last == "" || strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
			// No top-level domain is numeric: such a host is an IPv4 address written in
			// another form (2130706433, 0x7f.1, 127.1), which resolvers read diversely.
			return invalid(fmt.Sprintf("url has the host %q, which is neither a name nor an IP address: write an address in dotted form (192.0.2.1) or give a name", host))
		}
		if !allowPrivate && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
			return invalid(fmt.Sprintf("url has the host %q, which names the service's own machine: webhooks are delivered to public hosts only", host))
		}
		if !allowPrivate && len(labels) == 1 {
			// A name of one label is completed by the resolver's search domains: it
			// names a machine of the service's own network.
			return invalid(fmt.Sprintf("url has the host %q, a name without a domain: give a fully qualified name, such as hooks.example.com", host))
		}
		return nil
	}
	if allowPrivate {
		return nil
	}
	if reason, blocked := safefetch.Blocked(addr); blocked {
		return invalid(fmt.Sprintf("url has the host %s, %s: webhooks are delivered to public internet addresses only", host, reason))
	}
	return nil
}

// checkEvents returns events sorted and without repeats (nil for none: every type), or
// the refusal, whose message begins "events", of a name that is not an event type or
// of more than MaxTypes of them.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	known := Types()
	out := slices.Clone(events)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxTypes {
		return nil, invalid(fmt.Sprintf("events names %d event types: name at most %d, or none for every type", len(out), MaxTypes))
	}
	for _, t := range out {
		if !slices.Contains(known, t) {
			shown := t
			if len(shown) > 64 {
				shown = shown[:64] + "..."
			}
			return nil, invalid(fmt.Sprintf("events: %q is not an event type: name some of %s, or none for every type",
				strings.ToValidUTF8(shown, "?"), strings.Join(known, ", ")))
		}
	}
	return out, nil
}
