package oauth

import (
	"context"
	"errors"
	"net/netip"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
)

// ServiceKeys returns the [Keys] of a service. Keys are checked as the MCP channel's
// (auth.ChannelMCP): a key whose restrictions exclude MCP cannot approve a connection.
// ApproveKey and ApproveKeyID apply the key's IP allow-list to the address of the
// person approving. CheckKeyID, which the token endpoint calls, does not apply it,
// since it is not given an address: the MCP endpoint checks it on every call.
func ServiceKeys(svc *tollgate.Service) Keys { return serviceKeys{svc} }

type serviceKeys struct{ svc *tollgate.Service }

func (k serviceKeys) ApproveKey(ctx context.Context, value string, addr netip.Addr) (string, string, error) {
	v, ok := auth.ParseKey(value)
	if !ok {
		return "", "", refused("that is not an API key, which has the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", nil)
	}
	p, err := k.svc.Authenticate(ctx, tollgate.Caller{Verify: true,
		Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: v},
		Channel:    auth.ChannelMCP,
		Addr:       addr,
	})
	if err != nil {
		return "", "", keyError(err)
	}
	if p.Session() {
		return "", "", refused("only an API key can approve a connection", nil)
	}
	return p.Key.ID, p.Account.ID, nil
}

func (k serviceKeys) ApproveKeyID(ctx context.Context, keyID string, addr netip.Addr) (string, error) {
	p, err := k.svc.Authenticate(ctx, tollgate.Caller{Verify: true, KeyID: keyID, Channel: auth.ChannelMCP, Addr: addr})
	if err != nil {
		return "", keyError(err)
	}
	return p.Account.ID, nil
}

func (k serviceKeys) CheckKeyID(ctx context.Context, keyID string) error {
	_, err := k.svc.Authenticate(ctx, tollgate.Caller{Verify: true, KeyID: keyID, Channel: auth.ChannelMCP})
	if err != nil && !errors.Is(err, auth.ErrIPNotAllowed) {
		return keyError(err)
	}
	return nil
}

// keyError translates an error of the service: a verdict on the key becomes an error
// wrapping ErrKeyRefused, any other is returned as it is.
func keyError(err error) error {
	switch tollgate.CodeOf(err) {
	case tollgate.CodeUnauthorized, tollgate.CodeNoCredential, tollgate.CodeMalformedCredential:
		return refused("no key matches it", err)
	case tollgate.CodeForbidden:
		return refused(err.Error(), err)
	}
	return err
}

// A refusal is an error wrapping ErrKeyRefused whose message is meant for the person
// at the consent page.
type refusal struct {
	msg   string
	cause error
}

func refused(msg string, cause error) error { return &refusal{msg, cause} }

func (e *refusal) Error() string { return e.msg }

// Unwrap returns ErrKeyRefused and the cause.
func (e *refusal) Unwrap() []error { return []error{ErrKeyRefused, e.cause} }
