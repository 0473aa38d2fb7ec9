package accounts

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
)

// ErrLoginRefused is wrapped by the error of a host's login that refuses a person
// (session.Login): its text says why, for the person to read.
var ErrLoginRefused = errors.New("sign-in refused")

// Sessions. A session is started with an API key ([Manager.StartSession]) or for an
// account that the host's own login vouches for ([Manager.StartLoginSession]), and
// yields a session token: the x-jwt credential, which package session also carries in
// a browser cookie.
//
//   - A session started with a key acts as that key: its restrictions (APIs, channels,
//     addresses, expiry) hold the session's calls, and the audit log names the key. It
//     is bound to the key's value when it started: rotating the key, revoking it or
//     its expiry ends the session on the very next request, on every instance, with or
//     without [tollgate.Options.KeyCache].
//   - A session started through a login acts for the account as its primary key does,
//     by the key's id: revoking the primary key ends it, rotating it does not (the
//     person did not sign in with its value).
//   - Each start spends one event of the account's self-service budget
//     ([Options.SelfServiceLimit]); beyond it, the start is CodeRateLimited with
//     RetryAfter. Ending a session spends nothing and is never refused.
//   - A session lasts [Options.SessionTTL], never past its key's or its account's
//     expiry, and can be ended before ([Manager.EndSession]): its id is kept in
//     [tollgate.Options.SessionStore] until its expiry, and every instance sharing
//     that store refuses it from the next request on. That is one read of the store
//     for every request made with a session token.

// DefaultSessionTTL is the default [Options.SessionTTL].
const DefaultSessionTTL = 12 * time.Hour

// MaxSessionTTL is the longest [Options.SessionTTL] a service accepts.
const MaxSessionTTL = 30 * 24 * time.Hour

// A Session is a session just started. Its Token is a bearer secret: hand it to the
// client that started it (as the x-jwt credential or in a cookie), never to a log.
type Session struct {
	// SessionClaims are what the token says: the session's id (no secret), the
	// account it acts for, the key it acts as, and when it expires.
	auth.SessionClaims
	// Token is the session token, the x-jwt credential.
	Token string
	// CSRFToken is what a page sends back (package session reads it from the
	// X-CSRF-Token header) with every state-changing request it makes with the
	// session's cookie. It is worth nothing without the cookie.
	CSRFToken string
}

// StartSession starts a session that acts as the key c presents, after checking the key
// against the key store (never only a cache) and the restrictions that depend on how
// the caller arrived (c.Channel may be zero). A session token cannot start a session:
// that would let a session outlive its lifetime. The start is recorded in the audit
// log, with the key as actor.
func (m *Manager) StartSession(ctx context.Context, c tollgate.Caller) (Session, error) {
	if m.sessions == nil {
		return Session{}, errSessionsOff
	}
	if c.KeyID == "" && c.Credential.Kind == auth.SessionHeader {
		return Session{}, newError(tollgate.CodeForbidden, "a session cannot start another session; start it with an API key", nil)
	}
	c.Verify = true
	p, err := m.svc.Authenticate(ctx, c)
	if err != nil {
		return Session{}, err
	}
	reqlog.From(ctx).Identify(p.Account.ID, p.Key.ID)
	if err := m.spend(ctx, p.Account.ID); err != nil {
		return Session{}, err
	}
	h := p.Key.Hash
	return m.startSession(ctx, &p, &h, "", c.Addr)
}

// StartLoginSession starts a session for an account that the host's own login vouches
// for (its users say who may act for which account): the session acts as the
// account's primary key, by its id. The account must exist and its primary key be
// live, and addr allowed by their address restrictions. The start is recorded in the
// audit log with the primary key as actor and the reason "login".
func (m *Manager) StartLoginSession(ctx context.Context, accountID string, addr netip.Addr) (Session, error) {
	if m.sessions == nil {
		return Session{}, errSessionsOff
	}
	if err := checkText("account_id", accountID, maxIDLength); err != nil {
		return Session{}, err
	}
	// The primary key is created with its account: it is the account's first key.
	first, err := m.keys.Keys(ctx, auth.KeyQuery{Account: accountID, Limit: 1})
	if err != nil {
		return Session{}, m.manageError(ctx, "account", accountID, err)
	}
	if len(first.Keys) == 0 || !first.Keys[0].Primary {
		return Session{}, newError(tollgate.CodeNotFound, fmt.Sprintf("account %q has no primary key to act as", accountID), nil)
	}
	p, err := m.svc.Authenticate(ctx, tollgate.Caller{KeyID: first.Keys[0].ID, Addr: addr, Verify: true})
	if err != nil {
		return Session{}, err
	}
	if err := m.spend(ctx, p.Account.ID); err != nil {
		return Session{}, err
	}
	return m.startSession(ctx, &p, nil, "login", addr)
}

// startSession issues the token of a session for p, bound to keyHash if it is set, and
// records the start.
func (m *Manager) startSession(ctx context.Context, p *tollgate.Principal, keyHash *auth.Hash, reason string, addr netip.Addr) (Session, error) {
	now := m.now()
	expires := now.Add(m.sessionTTL)
	for _, r := range []auth.Restrictions{p.Key.Restrictions, p.Account.Restrictions} {
		if e := r.ExpiresAt(); !e.IsZero() && e.Before(expires) {
			expires = e
		}
	}
	tok, c, err := m.sessions.IssueClaims(auth.SessionClaims{Account: p.Account.ID, KeyID: p.Key.ID,
		IssuedAt: now, Expires: expires}, keyHash)
	if err != nil {
		// The key expires within the second: it is refused, as on its next call.
		return Session{}, newError(tollgate.CodeForbidden, "the API key expires now; use another key of the account", err)
	}
	m.changed(ctx, now, event.Change{Type: event.SessionStarted, Actor: event.Actor{ID: p.Key.ID, Addr: addr},
		Account: c.Account, Key: c.KeyID, Session: c.ID, Reason: reason})
	return Session{SessionClaims: c, Token: tok, CSRFToken: m.sessions.CSRFToken(c.ID)}, nil
}

// EndSession ends the session whose token is given (signs it out): every instance that
// shares [tollgate.Options.SessionStore] refuses the token from the next request on.
// Ending an ended or expired session does nothing and is not an error; a token that is
// not one of the service's is CodeUnauthorized. The end is published
// ([event.SessionEnded]) with the key the session acted as and addr, so that the audit
// log records it and front doors end the session's open connections at once.
func (m *Manager) EndSession(ctx context.Context, token string, addr netip.Addr) error {
	if m.sessions == nil {
		return errSessionsOff
	}
	now := m.now()
	c, err := m.sessions.Parse(token, now)
	if errors.Is(err, auth.ErrSessionExpired) {
		return nil
	}
	if err != nil {
		return newError(tollgate.CodeUnauthorized, err.Error(), err)
	}
	if m.ended == nil {
		return newError(tollgate.CodeNotFound, "this service cannot end sessions before their expiry (tollgate.Options.SessionStore is not set)", nil)
	}
	if c.ID == "" {
		return newError(tollgate.CodeInvalidInput, "this session token has no session id, so it cannot be ended; it lasts until it expires", nil)
	}
	ended, err := m.ended.SessionEnded(ctx, c.ID)
	if err != nil {
		return m.unavailable(ctx, "session store", err)
	}
	if ended {
		return nil
	}
	if err := m.ended.EndSession(ctx, c.ID, c.Expires, now); err != nil {
		return m.unavailable(ctx, "session store", err)
	}
	// Front doors that hold connections check again those of the key the session
	// acted as (Key is "" for the sessions that named no key): the ended session's
	// are refused and end, the others pass.
	actor := c.KeyID
	if actor == "" {
		actor = audit.SessionActor(c.ID)
	}
	m.changed(ctx, now, event.Change{Type: event.SessionEnded, Actor: event.Actor{ID: actor, Addr: addr},
		Account: c.Account, Key: c.KeyID, Session: c.ID})
	return nil
}

var errSessionsOff = newError(tollgate.CodeNotFound, "this service has no sessions (tollgate.Options.Sessions is not set)", nil)

// CanEndSessions reports whether the service can end sessions before their expiry:
// it has session tokens and a store of ended sessions ([tollgate.Options.SessionStore]).
func (m *Manager) CanEndSessions() bool { return m.sessions != nil && m.ended != nil }
