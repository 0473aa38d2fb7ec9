// Package oauthstore holds what the authorization server of package
// [github.com/tollgate-dev/tollgate/oauth] keeps: the [Store] interface and its
// records. It is apart from package oauth, which depends on the service, so that store
// implementations (store/memory, store/postgres) and their conformance suite
// (storetest.TestOAuthStore) depend on nothing but these records.
//
// Codes and tokens are kept by [Hash] only: a Store never sees their values.
package oauthstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// A Hash is the SHA-256 digest of a secret the server hands out: an authorization code,
// an access token or a refresh token. It is the only form in which those secrets are
// stored; a [Store] never sees their values.
type Hash [sha256.Size]byte

// HashSecret returns the hash of a code or token value.
func HashSecret(value string) Hash { return sha256.Sum256([]byte(value)) }

// String returns the hash in hexadecimal.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// A Client is an OAuth client registered through dynamic client registration (RFC 7591).
// Every client is public: it has no secret and proves itself with PKCE. Clients that
// identify themselves with a metadata document URL are not stored.
type Client struct {
	// ID is the client_id the server assigned.
	ID string
	// Name is the client_name the client gave, shown on the consent page; it may be empty.
	Name string
	// RedirectURIs are the registered redirect URIs, at least one.
	RedirectURIs []string
	// CreatedAt is when the client registered.
	CreatedAt time.Time
}

// An Approval is an authorization grant: a person's consent, given on the consent page
// with one API key, that one client may act for that key at one resource. Its
// authorization code and every token issued from it belong to it, so revoking it ends
// them all (the "grant family").
type Approval struct {
	// ID identifies the approval. It is derived from the consent form's one-time
	// nonce, so that a form can be submitted only once.
	ID string
	// ClientID is the client the approval is for.
	ClientID string
	// KeyID is the stable id of the API key that approved. Tokens act for this key:
	// a rotation of the key's value keeps them working, its revocation ends them.
	KeyID string
	// AccountID is the account of the key.
	AccountID string
	// Resource is the protected resource (RFC 8707) the tokens are for: their audience.
	Resource string
	// Scopes are the scopes granted.
	Scopes []string
	// CreatedAt is when the approval was given.
	CreatedAt time.Time
	// ExpiresAt is when the approval and everything issued from it may be deleted:
	// the latest expiry of its code and tokens. Stores extend it as tokens are issued.
	ExpiresAt time.Time
	// RevokedAt is when the approval was revoked, or the zero time.
	RevokedAt time.Time
}

// Revoked reports whether the approval has been revoked.
func (a *Approval) Revoked() bool { return !a.RevokedAt.IsZero() }

// A Code is a stored authorization code.
type Code struct {
	// Hash is the hash of the code's value.
	Hash Hash
	// ApprovalID is the approval the code was issued for.
	ApprovalID string
	// RedirectURI is the redirect URI the code was sent to; the token request must
	// repeat it.
	RedirectURI string
	// Challenge is the PKCE S256 code challenge of the authorization request.
	Challenge string
	// ExpiresAt is when the code stops working.
	ExpiresAt time.Time
	// Redeemed reports a code that has been exchanged already. Stores set it; it is
	// ignored on the way in.
	Redeemed bool
}

// A TokenKind tells access tokens from refresh tokens.
type TokenKind uint8

// The kinds of token.
const (
	AccessToken TokenKind = iota + 1
	RefreshToken
)

// A Token is a stored access or refresh token.
type Token struct {
	// Hash is the hash of the token's value.
	Hash Hash
	// ApprovalID is the approval the token was issued from.
	ApprovalID string
	// Kind is AccessToken or RefreshToken.
	Kind TokenKind
	// ExpiresAt is when the token stops working.
	ExpiresAt time.Time
	// Used reports a refresh token that has been exchanged already (rotated). Stores
	// set it; it is ignored on the way in. A used refresh token presented again means
	// it was copied, and its approval is revoked.
	Used bool
}

// A Store keeps the server's clients, approvals, codes and tokens. Codes and tokens are
// kept by hash only.
//
// Implementations must be safe for concurrent use, must not keep or change the values
// passed in, and never read the clock: every method that depends on time is given it.
// A change must be visible to the very next read on any instance sharing the store.
// Errors that report well-known conditions wrap the sentinels of package store
// (store.ErrNotFound, store.ErrConflict) and name the identifier involved; any other
// error means the store is unavailable. Every implementation should pass
// storetest.TestOAuthStore.
//
// Package oauth calls it oauth.Store.
type Store interface {
	// CreateClient stores a registered client. It returns an error wrapping
	// store.ErrConflict if the client id is taken.
	CreateClient(ctx context.Context, c Client) error

	// Client returns the client with the given id, or an error wrapping
	// store.ErrNotFound.
	Client(ctx context.Context, id string) (Client, error)

	// CreateApproval stores an approval together with its authorization code,
	// atomically. It returns an error wrapping store.ErrConflict, and stores nothing,
	// if the approval id or the code hash is taken.
	CreateApproval(ctx context.Context, a Approval, c Code) error

	// Code returns the code with hash h and its approval, with Redeemed telling
	// whether it was exchanged already, and changes nothing: the token endpoint reads
	// a code to check an exchange (client, redirect URI, PKCE verifier, resource)
	// before it redeems it, so that an exchange that fails a check does not use the
	// code up. It returns an error wrapping store.ErrNotFound if no code has the hash,
	// the code has expired at now, or its approval is revoked.
	Code(ctx context.Context, h Hash, now time.Time) (Code, Approval, error)

	// RedeemCode marks the live code with hash h redeemed and returns it (with
	// Redeemed set) and its approval. Of concurrent redemptions of one code exactly
	// one succeeds. It returns an error wrapping store.ErrNotFound if no code has the
	// hash, the code has expired at now, or the code was never redeemed and its
	// approval is revoked. A code redeemed before is a replay, which means that
	// someone else holds the code (RFC 6749 section 4.1.2): in the same atomic step,
	// RedeemCode revokes the code's approval at now (keeping an earlier RevokedAt), and
	// it returns an error wrapping store.ErrConflict with the Code and the revoked
	// Approval filled in.
	RedeemCode(ctx context.Context, h Hash, now time.Time) (Code, Approval, error)

	// IssueTokens stores tokens issued from a live approval and extends the approval's
	// ExpiresAt to the latest token expiry. It returns an error wrapping
	// store.ErrNotFound, and stores nothing, if the approval does not exist or is
	// revoked; and store.ErrConflict if a token hash is taken.
	IssueTokens(ctx context.Context, approvalID string, tokens []Token, now time.Time) error

	// Token returns the token with hash h and its approval. A used refresh token is
	// returned with Used set. It returns an error wrapping store.ErrNotFound if no
	// token has the hash, the token has expired at now, or its approval is revoked.
	Token(ctx context.Context, h Hash, now time.Time) (Token, Approval, error)

	// RotateToken exchanges the live refresh token with hash old for next (a new
	// access and refresh token of the same approval): it marks old used and stores
	// next, atomically, and extends the approval's ExpiresAt as IssueTokens does. Of
	// concurrent rotations of one token exactly one succeeds. It returns an error
	// wrapping store.ErrNotFound if old is unknown, not a refresh token, expired at now
	// or of a revoked approval; and an error wrapping store.ErrConflict if old was used
	// before, in which case the returned Approval is filled in, so that the caller can
	// revoke it. It returns the approval.
	RotateToken(ctx context.Context, old Hash, next []Token, now time.Time) (Approval, error)

	// RevokeApproval marks an approval revoked at now, which ends its code and every
	// token issued from it. Revoking a revoked approval keeps the first RevokedAt and
	// is not an error. It returns an error wrapping store.ErrNotFound if there is no
	// such approval.
	RevokeApproval(ctx context.Context, id string, now time.Time) error

	// DeleteExpired deletes what can no longer be used at now: approvals whose
	// ExpiresAt is at or before now, with their codes and tokens; codes and tokens
	// that expired at or before now; and clients created before unusedSince that no
	// approval refers to.
	DeleteExpired(ctx context.Context, now, unusedSince time.Time) error
}
