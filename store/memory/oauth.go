package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
)

// OAuthStore is the in-memory [oauthstore.Store]. One mutex guards everything: OAuth
// requests are rare next to API calls. Its zero value is not usable; call
// [NewOAuthStore].
type OAuthStore struct {
	mu        sync.Mutex
	clients   map[string]oauthstore.Client
	approvals map[string]*oauthstore.Approval
	codes     map[oauthstore.Hash]*oauthstore.Code
	tokens    map[oauthstore.Hash]*oauthstore.Token
}

// Interface guard.
var _ oauthstore.Store = (*OAuthStore)(nil)

// NewOAuthStore returns an empty OAuthStore.
func NewOAuthStore() *OAuthStore {
	return &OAuthStore{
		clients:   make(map[string]oauthstore.Client),
		approvals: make(map[string]*oauthstore.Approval),
		codes:     make(map[oauthstore.Hash]*oauthstore.Code),
		tokens:    make(map[oauthstore.Hash]*oauthstore.Token),
	}
}

// CreateClient stores a registered client.
func (s *OAuthStore) CreateClient(ctx context.Context, c oauthstore.Client) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[c.ID]; ok {
		return fmt.Errorf("memory: oauth client %q: %w", c.ID, store.ErrConflict)
	}
	c.RedirectURIs = slices.Clone(c.RedirectURIs)
	s.clients[c.ID] = c
	return nil
}

// Client returns the client with the given id.
func (s *OAuthStore) Client(ctx context.Context, id string) (oauthstore.Client, error) {
	if err := ctx.Err(); err != nil {
		return oauthstore.Client{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return oauthstore.Client{}, fmt.Errorf("memory: oauth client %q: %w", id, store.ErrNotFound)
	}
	c.RedirectURIs = slices.Clone(c.RedirectURIs)
	return c, nil
}

// CreateApproval stores an approval with its authorization code.
func (s *OAuthStore) CreateApproval(ctx context.Context, a oauthstore.Approval, c oauthstore.Code) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.approvals[a.ID]; ok {
		return fmt.Errorf("memory: oauth approval %q: %w", a.ID, store.ErrConflict)
	}
	if _, ok := s.codes[c.Hash]; ok {
		return fmt.Errorf("memory: oauth code of approval %q: %w", a.ID, store.ErrConflict)
	}
	a.Scopes = slices.Clone(a.Scopes)
	s.approvals[a.ID] = &a
	c.Redeemed = false
	s.codes[c.Hash] = &c
	return nil
}

// Code returns a live code and its approval.
func (s *OAuthStore) Code(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	return s.code(ctx, h, now, false)
}

// RedeemCode marks a code redeemed and returns it with its approval; a code redeemed
// before revokes its approval.
func (s *OAuthStore) RedeemCode(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Code, oauthstore.Approval, error) {
	return s.code(ctx, h, now, true)
}

// code serves Code, and RedeemCode when redeem is set.
func (s *OAuthStore) code(ctx context.Context, h oauthstore.Hash, now time.Time, redeem bool) (oauthstore.Code, oauthstore.Approval, error) {
	if err := ctx.Err(); err != nil {
		return oauthstore.Code{}, oauthstore.Approval{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.codes[h]
	if !ok || !now.Before(c.ExpiresAt) {
		return oauthstore.Code{}, oauthstore.Approval{}, fmt.Errorf("memory: oauth code: %w", store.ErrNotFound)
	}
	a, ok := s.approvals[c.ApprovalID]
	switch {
	case !ok: // cannot happen: a code is deleted with its approval
		return oauthstore.Code{}, oauthstore.Approval{}, fmt.Errorf("memory: oauth code of approval %q: %w", c.ApprovalID, store.ErrNotFound)
	case redeem && c.Redeemed: // a replay
		if !a.Revoked() {
			a.RevokedAt = now
		}
		return *c, copyApproval(a), fmt.Errorf("memory: oauth code of approval %q was redeemed before; the approval is revoked: %w", a.ID, store.ErrConflict)
	case a.Revoked():
		return oauthstore.Code{}, oauthstore.Approval{}, fmt.Errorf("memory: oauth code of approval %q: %w", a.ID, store.ErrNotFound)
	}
	if redeem {
		c.Redeemed = true
	}
	return *c, copyApproval(a), nil
}

// IssueTokens stores tokens of a live approval.
func (s *OAuthStore) IssueTokens(ctx context.Context, approvalID string, tokens []oauthstore.Token, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.liveApproval(approvalID); !ok {
		return fmt.Errorf("memory: oauth approval %q: %w", approvalID, store.ErrNotFound)
	}
	return s.insertTokens(approvalID, tokens)
}

// Token returns a token and its approval.
func (s *OAuthStore) Token(ctx context.Context, h oauthstore.Hash, now time.Time) (oauthstore.Token, oauthstore.Approval, error) {
	if err := ctx.Err(); err != nil {
		return oauthstore.Token{}, oauthstore.Approval{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, a, err := s.liveToken(h, now)
	if err != nil {
		return oauthstore.Token{}, oauthstore.Approval{}, err
	}
	return *t, a, nil
}

// RotateToken exchanges a refresh token for new tokens.
func (s *OAuthStore) RotateToken(ctx context.Context, old oauthstore.Hash, next []oauthstore.Token, now time.Time) (oauthstore.Approval, error) {
	if err := ctx.Err(); err != nil {
		return oauthstore.Approval{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, a, err := s.liveToken(old, now)
	switch {
	case err != nil:
		return oauthstore.Approval{}, err
	case t.Kind != oauthstore.RefreshToken:
		return oauthstore.Approval{}, fmt.Errorf("memory: oauth refresh token of approval %q: %w", a.ID, store.ErrNotFound)
	case t.Used:
		return a, fmt.Errorf("memory: oauth refresh token of approval %q was used before: %w", a.ID, store.ErrConflict)
	}
	if err := s.insertTokens(a.ID, next); err != nil {
		return oauthstore.Approval{}, err
	}
	t.Used = true
	a, _ = s.liveApproval(a.ID)
	return a, nil
}

// RevokeApproval marks an approval revoked.
func (s *OAuthStore) RevokeApproval(ctx context.Context, id string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return fmt.Errorf("memory: oauth approval %q: %w", id, store.ErrNotFound)
	}
	if a.RevokedAt.IsZero() {
		a.RevokedAt = now
	}
	return nil
}

// DeleteExpired deletes what can no longer be used at now.
func (s *OAuthStore) DeleteExpired(ctx context.Context, now, unusedSince time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used := make(map[string]bool)
	for id, a := range s.approvals {
		if !now.Before(a.ExpiresAt) {
			delete(s.approvals, id)
			continue
		}
		used[a.ClientID] = true
	}
	for h, c := range s.codes {
		if _, ok := s.approvals[c.ApprovalID]; !ok || !now.Before(c.ExpiresAt) {
			delete(s.codes, h)
		}
	}
	for h, t := range s.tokens {
		if _, ok := s.approvals[t.ApprovalID]; !ok || !now.Before(t.ExpiresAt) {
			delete(s.tokens, h)
		}
	}
	for id, c := range s.clients {
		if !used[id] && c.CreatedAt.Before(unusedSince) {
			delete(s.clients, id)
		}
	}
	return nil
}

// liveApproval returns a copy of the approval with the given id if it exists and is
// not revoked. The caller holds s.mu.
func (s *OAuthStore) liveApproval(id string) (oauthstore.Approval, bool) {
	a, ok := s.approvals[id]
	if !ok || a.Revoked() {
		return oauthstore.Approval{}, false
	}
	return copyApproval(a), true
}

// copyApproval returns a copy of a that shares nothing with it.
func copyApproval(a *oauthstore.Approval) oauthstore.Approval {
	c := *a
	c.Scopes = slices.Clone(a.Scopes)
	return c
}

// liveToken returns the token with hash h, if it has not expired at now and its
// approval is live, and a copy of the approval. The caller holds s.mu.
func (s *OAuthStore) liveToken(h oauthstore.Hash, now time.Time) (*oauthstore.Token, oauthstore.Approval, error) {
	t, ok := s.tokens[h]
	if !ok || !now.Before(t.ExpiresAt) {
		return nil, oauthstore.Approval{}, fmt.Errorf("memory: oauth token: %w", store.ErrNotFound)
	}
	a, ok := s.liveApproval(t.ApprovalID)
	if !ok {
		return nil, oauthstore.Approval{}, fmt.Errorf("memory: oauth token of approval %q: %w", t.ApprovalID, store.ErrNotFound)
	}
	return t, a, nil
}

// insertTokens stores new tokens of an approval and extends its expiry to theirs.
// The caller holds s.mu and has checked the approval.
func (s *OAuthStore) insertTokens(approvalID string, tokens []oauthstore.Token) error {
	for _, t := range tokens {
		if _, ok := s.tokens[t.Hash]; ok {
			return fmt.Errorf("memory: oauth token of approval %q: %w", approvalID, store.ErrConflict)
		}
	}
	a := s.approvals[approvalID]
	for _, t := range tokens {
		t.ApprovalID, t.Used = approvalID, false
		s.tokens[t.Hash] = &t
		if t.ExpiresAt.After(a.ExpiresAt) {
			a.ExpiresAt = t.ExpiresAt
		}
	}
	return nil
}
