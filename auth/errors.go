package auth

import (
	"errors"
	"fmt"
)

// Errors of the edge check: the request carries no credential, or one of the wrong
// shape. The service answers both with a bare HTML 403, with no JSON and no CORS
// headers: the edge refuses them before any account is looked up.
var (
	ErrNoCredential        = errors.New("no API key was sent")
	ErrMalformedCredential = errors.New("the API key is not a UUID")
)

// Errors that are a verdict on the credential itself (401).
var (
	// ErrUnknownKey reports a well-formed key that matches no key of any account,
	// including the old value of a rotated key. Its text, "unauthorized", is what clients
	// are told, and says nothing about which keys exist.
	ErrUnknownKey = errors.New("unauthorized")
	// ErrInvalidSession reports a session token (x-jwt) that is forged, malformed,
	// expired, or names an account that does not exist.
	ErrInvalidSession = errors.New("the session token is not valid")
	// ErrSessionExpired reports a session token past its expiry. It wraps
	// ErrInvalidSession.
	ErrSessionExpired = fmt.Errorf("%w: it has expired; sign in again", ErrInvalidSession)
	// ErrSessionsDisabled reports a session token sent to a service that accepts none.
	ErrSessionsDisabled = errors.New("session tokens (x-jwt) are not accepted by this service; send an API key")
)

// ErrForbidden is matched by every [*DeniedError]: a valid key whose restrictions or
// state block the call (403).
var ErrForbidden = errors.New("forbidden")

// The reasons a valid key is refused. Each is the Reason of a [*DeniedError].
var (
	ErrKeyRevoked        = errors.New("the API key has been revoked")
	ErrKeyExpired        = errors.New("the API key has expired")
	ErrIPNotAllowed      = errors.New("the API key may not be used from this address")
	ErrChannelNotAllowed = errors.New("the API key may not be used over this channel")
	ErrAPINotAllowed     = errors.New("the API key may not call this API")
)

// ErrWidens is wrapped by the error of a sub-key whose restrictions would allow more
// than its account does.
var ErrWidens = errors.New("a sub-key cannot widen its account")

// A DeniedError reports a valid credential that may not make the call. It matches both
// its Reason and [ErrForbidden] with [errors.Is].
type DeniedError struct {
	// Reason is one of ErrKeyRevoked, ErrKeyExpired, ErrIPNotAllowed,
	// ErrChannelNotAllowed, ErrAPINotAllowed.
	Reason error
	// Message says what blocked the call, for the caller.
	Message string
}

func (e *DeniedError) Error() string { return e.Message }

// Unwrap returns the reason and [ErrForbidden].
func (e *DeniedError) Unwrap() []error { return []error{e.Reason, ErrForbidden} }

func denied(reason error, msg string) error { return &DeniedError{Reason: reason, Message: msg} }

// ErrInvalid is matched by the errors that report a wrong request, such as
// restrictions that cannot be parsed. Their messages say what to fix.
var ErrInvalid = errors.New("auth: invalid request")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
