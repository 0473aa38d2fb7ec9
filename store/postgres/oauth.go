package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
)

// OAuthStore is the PostgreSQL [oauthstore.Store]: the grants of the embedded OAuth
// authorization server (package oauth), in the tables tollgate_oauth_clients,
// tollgate_oauth_approvals, tollgate_oauth_codes and tollgate_oauth_tokens. Codes and
// tokens are kept as hashes only. Each method is one statement or one function call;
// redeeming a code and rotating a refresh token lock the approval's row, so that of
// concurrent calls exactly one succeeds.
//
// Like [Store], it holds no state besides its DB and is safe for concurrent use when
// its DB is. Create it with [NewOAuthStore], after [Migrate] has run.
type OAuthStore struct {
	db DB
}

// Interface guard.
var _ oauthstore.Store = (*OAuthStore)(nil)

// NewOAuthStore returns an OAuthStore on db. It does not touch the database: run
// [Migrate] first.
func NewOAuthStore(db DB) (*OAuthStore, error) {
	if db == nil {
		return nil, errors.New("postgres: NewOAuthStore needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	return &OAuthStore{db: db}, nil
}

// approvalColumns are the columns of an approval, in the order approvalRow reads them.
const approvalColumns = `a.id, a.client_id, a.key_id, a.account_id, a.resource, a.scopes, a.created_at, a.expires_at, a.revoked_at`

// approvalRow receives the columns of an approval, which may all be NULL (the empty
// result of a function).
type approvalRow struct {
	id, client, key, account, resource *string
	scopes                             []string
	created, expires, revoked          *time.Time
}

func (r *approvalRow) dest() []any {
	return []any{&r.id, &r.client, &r.key, &r.account, &r.resource, &r.scopes, &r.created, &r.expires, &r.revoked}
}

func (r *approvalRow) approval() oauthstore.Approval {
	if r.id == nil || r.client == nil || r.key == nil || r.account == nil || r.resource == nil || r.created == nil || r.expires == nil {
		return oauthstore.Approval{}
	}
	a := oauthstore.Approval{ID: *r.id, ClientID: *r.client, KeyID: *r.key, AccountID: *r.account, Resource: *r.resource,
		Scopes: r.scopes, CreatedAt: r.created.UTC(), ExpiresAt: r.expires.UTC()}
	if r.revoked != nil {
		a.RevokedAt = r.revoked.UTC()
	}
	return a
}

// CreateClient stores a registered client.
func (s *OAuthStore) CreateClient(ctx context.Context, c oauthstore.Client) error {
	_, err := s.db.Exec(ctx, `INSERT INTO tollgate_oauth_clients (id, name, redirect_uris, created_at) VALUES ($1, $2, $3, $4)`,
		c.ID, c.Name, c.RedirectURIs, c.CreatedAt)
	if err != nil {
		return wrapErr(ctx, err, "oauth client %q", c.ID)
	}
	return nil
}

// Client returns the client with the given id.
func (s *OAuthStore) Client(ctx context.Context, id string) (oauthstore.Client, error) {
	c := oauthstore.Client{ID: id}
	err := s.db.QueryRow(ctx, `SELECT name, redirect_uris, created_at FROM tollgate_oauth_clients WHERE id = $1`, id).
		Scan(&c.Name, &c.RedirectURIs, &c.CreatedAt)
	if err != nil {
		return oauthstore.Client{}, wrapErr(ctx, err, "oauth client %q", id)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// CreateApproval stores an approval with its authorization code, in one statement.
func (s *OAuthStore) CreateApproval(ctx context.Context, a oauthstore.Approval, c oauthstore.Code) error {
	_, err := s.db.Exec(ctx, `
		WITH a AS (
			INSERT INTO tollgate_oauth_approvals (id, client_id, key_id, account_id, resource, scopes, created_at, expires_at, revoked_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			RETURNING id)
		INSERT INTO tollgate_oauth_codes (hash, approval_id, redirect_uri, challenge, expires_at)
		SELECT $10, a.id, $11, $12, $13 FROM a`,
		a.ID, a.ClientID, a.KeyID, a.AccountID, a.Resource, nonNil(a.Scopes), a.CreatedAt, a.ExpiresAt, nullTime(a.RevokedAt),
		c.Hash[:], c.RedirectURI, c.Challenge, c.ExpiresAt)
	if err != nil {
		return wrapErr(ctx, err, "oauth approval %q", a.ID)
	}
	return nil
}

// codeColumns are the columns of a code, in the order codeRow reads them, from c.
const codeColumns = `c.hash, c.approval_id, c.redirect_uri, c.challenge, c.expires_at, c.redeemed`

// codeRow receives the columns of a code, which may all be NULL (the empty result of
// a function).
type codeRow struct {
	hash                 []byte
	approval, uri, chall *string
	expires              *time.Time
	redeemed             *bool
}

func (r *codeRow) dest() []any {
	return []any{&r.hash, &r.approval, &r.uri, &r.chall, &r.expires, &r.redeemed}
}

// code returns the code the row holds, or false if it holds none.
func (r *codeRow) code() (oauthstore.Code, bool) {
	var c oauthstore.Code
	if len(r.hash) != len(c.Hash) || r.approval == nil || r.uri == nil || r.chall == nil || r.expires == nil || r.redeemed == nil {
		return oauthstore.Code{}, false
	}
	copy(c.Hash[:], r.hash)
	c.ApprovalID, c.RedirectURI, c.Challenge, c.ExpiresAt, c.Redeemed = *r.approval, *r.uri, *r.chall, r.expires.UTC(), *r.redeemed
	return c, true
}

// Code returns a live code and its approval, in one statement that changes nothing.
func (s *OAuthStore) Code(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	var cr codeRow
	var ar approvalRow
	err := s.db.QueryRow(ctx, `
		SELECT `+codeColumns+`, `+approvalColumns+`
		  FROM tollgate_oauth_codes c JOIN tollgate_oauth_approvals a ON a.id = c.approval_id
		 WHERE c.hash = $1 AND c.expires_at > $2 AND a.revoked_at IS NULL`, h[:], now).
		Scan(append(cr.dest(), ar.dest()...)...)
	if err != nil {
		return oauthstore.Code{}, oauthstore.Approval{}, wrapErr(ctx, err, "oauth code")
	}
	c, _ := cr.code()
	return c, ar.approval(), nil
}

// RedeemCode marks a code redeemed and returns it with its approval, in one function
// call; a code redeemed before revokes its approval in the same call.
func (s *OAuthStore) RedeemCode(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	var status int
	var cr codeRow
	var ar approvalRow
	err := s.db.QueryRow(ctx, `
		SELECT r.o_status, `+codeColumns+`, `+approvalColumns+`
		  FROM tollgate_oauth_redeem($1, $2) r, LATERAL (SELECT (r.o_code).*) c, LATERAL (SELECT (r.o_approval).*) a`, h[:], now).
		Scan(append(append([]any{&status}, cr.dest()...), ar.dest()...)...)
	if err != nil {
		return oauthstore.Code{}, oauthstore.Approval{}, wrapErr(ctx, err, "oauth code")
	}
	c, ok := cr.code()
	if status == 1 || !ok {
		return oauthstore.Code{}, oauthstore.Approval{}, fmt.Errorf("postgres: oauth code: %w", store.ErrNotFound)
	}
	a := ar.approval()
	if status == 2 {
		return c, a, fmt.Errorf("postgres: oauth code of approval %q was redeemed before; the approval is revoked: %w", a.ID, store.ErrConflict)
	}
	return c, a, nil
}

// IssueTokens stores tokens of a live approval and extends its expiry, in one
// statement.
func (s *OAuthStore) IssueTokens(ctx context.Context, approvalID string, tokens []oauthstore.Token, now time.Time) error {
	hashes, kinds, expires, latest := tokenArrays(tokens)
	var n int
	err := s.db.QueryRow(ctx, `
		WITH a AS (
			UPDATE tollgate_oauth_approvals SET expires_at = greatest(expires_at, $5)
			 WHERE id = $1 AND revoked_at IS NULL
			RETURNING id),
		t AS (
			INSERT INTO tollgate_oauth_tokens (hash, approval_id, kind, expires_at)
			SELECT n.hash, a.id, n.kind, n.expires_at FROM a, unnest($2::bytea[], $3::smallint[], $4::timestamptz[]) AS n(hash, kind, expires_at)
			RETURNING 1)
		SELECT count(*) FROM a`, approvalID, hashes, kinds, expires, latest).Scan(&n)
	if err != nil {
		return wrapErr(ctx, err, "oauth tokens of approval %q", approvalID)
	}
	if n == 0 {
		return fmt.Errorf("postgres: oauth approval %q: %w", approvalID, store.ErrNotFound)
	}
	return nil
}

// Token returns a token and its approval.
func (s *OAuthStore) Token(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Token, oauthstore.Approval, error) {
	t := oauthstore.Token{Hash: h}
	var kind int16
	var ar approvalRow
	err := s.db.QueryRow(ctx, `
		SELECT t.approval_id, t.kind, t.expires_at, t.used, `+approvalColumns+`
		  FROM tollgate_oauth_tokens t JOIN tollgate_oauth_approvals a ON a.id = t.approval_id
		 WHERE t.hash = $1 AND t.expires_at > $2 AND a.revoked_at IS NULL`, h[:], now).
		Scan(append([]any{&t.ApprovalID, &kind, &t.ExpiresAt, &t.Used}, ar.dest()...)...)
	if err != nil {
		return oauthstore.Token{}, oauthstore.Approval{}, wrapErr(ctx, err, "oauth token")
	}
	t.Kind, t.ExpiresAt = oauthstore.TokenKind(kind), t.ExpiresAt.UTC()
	return t, ar.approval(), nil
}

// RotateToken exchanges a live refresh token for new tokens, in one function call.
func (s *OAuthStore) RotateToken(ctx context.Context, old oauthstore.Hash, next []oauthstore.Token, now time.Time) (oauthstore.Approval, error) {
	hashes, kinds, expires, _ := tokenArrays(next)
	var status int
	var ar approvalRow
	err := s.db.QueryRow(ctx, `
		SELECT r.o_status, `+approvalColumns+`
		  FROM tollgate_oauth_rotate($1, $2, $3, $4, $5) r, LATERAL (SELECT (r.o_approval).*) a`,
		old[:], now, hashes, kinds, expires).Scan(append([]any{&status}, ar.dest()...)...)
	if err != nil {
		return oauthstore.Approval{}, wrapErr(ctx, err, "oauth refresh token")
	}
	a := ar.approval()
	switch status {
	case 0:
		return a, nil
	case 2:
		return a, fmt.Errorf("postgres: oauth refresh token of approval %q was used before: %w", a.ID, store.ErrConflict)
	}
	return oauthstore.Approval{}, fmt.Errorf("postgres: oauth refresh token: %w", store.ErrNotFound)
}

// RevokeApproval marks an approval revoked, keeping the first revocation time.
func (s *OAuthStore) RevokeApproval(ctx context.Context, id string, now time.Time) error {
	tag, err := s.db.Exec(ctx, `UPDATE tollgate_oauth_approvals SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1`, id, now)
	if err != nil {
		return wrapErr(ctx, err, "oauth approval %q", id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: oauth approval %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// DeleteExpired deletes what can no longer be used at now, in one statement.
func (s *OAuthStore) DeleteExpired(ctx context.Context, now, unusedSince time.Time) error {
	_, err := s.db.Exec(ctx, `
		WITH a AS (DELETE FROM tollgate_oauth_approvals WHERE expires_at <= $1),
		     c AS (DELETE FROM tollgate_oauth_codes WHERE expires_at <= $1),
		     t AS (DELETE FROM tollgate_oauth_tokens WHERE expires_at <= $1)
		DELETE FROM tollgate_oauth_clients k
		 WHERE k.created_at < $2
		   AND NOT EXISTS (SELECT 1 FROM tollgate_oauth_approvals x WHERE x.client_id = k.id AND x.expires_at > $1)`,
		now, unusedSince)
	if err != nil {
		return wrapErr(ctx, err, "oauth: delete expired records")
	}
	return nil
}

// tokenArrays returns the columns of tokens as arrays, and their latest expiry.
func tokenArrays(tokens []oauthstore.Token) (hashes [][]byte, kinds []int16, expires []time.Time, latest time.Time) {
	for _, t := range tokens {
		hashes = append(hashes, t.Hash[:])
		kinds = append(kinds, int16(t.Kind))
		expires = append(expires, t.ExpiresAt)
		if t.ExpiresAt.After(latest) {
			latest = t.ExpiresAt
		}
	}
	return hashes, kinds, expires, latest
}

// nonNil returns s, or an empty slice for nil, for a NOT NULL array column.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
