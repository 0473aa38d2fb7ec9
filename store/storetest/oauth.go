package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store"
)

// TestOAuthStore checks that an [oauthstore.Store] behaves as its documentation says: codes
// are redeemed once, even by concurrent requests; refresh tokens are rotated once, and
// a rotated one is recognised; a revoked approval ends its code and tokens; expiry
// follows the time passed in; records are found by hash only.
//
// newStore is called once per subtest and must return an empty store; it registers any
// teardown with t.Cleanup. The subtests run in parallel. Run the suite with -race.
func TestOAuthStore(t *testing.T, newStore func(t *testing.T) oauthstore.Store) {
	t.Helper()
	run(t, newStore, oauthStoreRows)
}

var oauthStoreRows = []behaviour[oauthstore.Store]{
	{"ClientCreateThenRead",
		"A client created is returned by Client with every field intact.",
		osClientCreateThenRead},
	{"ClientMissing",
		"Client of an unknown id returns an error wrapping store.ErrNotFound that names the id.",
		osClientMissing},
	{"ClientDuplicate",
		"CreateClient with a taken id returns store.ErrConflict and keeps the first client.",
		osClientDuplicate},
	{"RedeemCode",
		"A code stored with its approval is redeemed once, returning the code (Redeemed) and the approval with every field intact.",
		osRedeemCode},
	{"CodeRead",
		"Code returns a live code and its approval with every field intact, Redeemed once it was redeemed; an unknown, expired or revoked code is store.ErrNotFound.",
		osCodeRead},
	{"BadExchangeKeepsCode",
		"Reading a code, as an exchange that fails its checks does before it would redeem, changes nothing: the code is then redeemed once and its approval stays live.",
		osBadExchangeKeepsCode},
	{"RedeemTwice",
		"Redeeming a redeemed code (a replay) returns store.ErrConflict with the code and its approval filled in, and revokes the approval in the same step: its tokens end, and a later replay keeps the first RevokedAt.",
		osRedeemTwice},
	{"RedeemExpired",
		"A code is redeemable until just before its ExpiresAt; at ExpiresAt it is store.ErrNotFound.",
		osRedeemExpired},
	{"RedeemUnknown",
		"Redeeming a hash that no code has returns store.ErrNotFound.",
		osRedeemUnknown},
	{"ApprovalDuplicateID",
		"CreateApproval with a taken approval id returns store.ErrConflict and stores nothing: its code cannot be redeemed.",
		osApprovalDuplicateID},
	{"ApprovalDuplicateCode",
		"CreateApproval with a taken code hash returns store.ErrConflict and stores nothing: the approval does not exist.",
		osApprovalDuplicateCode},
	{"IssueTokens",
		"Tokens issued from an approval are returned by Token with every field intact, and extend the approval's ExpiresAt.",
		osIssueTokens},
	{"IssueTokensDeadApproval",
		"IssueTokens for an unknown or revoked approval returns store.ErrNotFound and stores nothing.",
		osIssueTokensDeadApproval},
	{"TokenExpired",
		"A token is returned until just before its ExpiresAt; at ExpiresAt it is store.ErrNotFound.",
		osTokenExpired},
	{"TokenByHashOnly",
		"A token is found by its exact hash only; a hash that differs in one bit finds nothing.",
		osTokenByHashOnly},
	{"RotateToken",
		"RotateToken marks the old refresh token Used, stores the new tokens and extends the approval's ExpiresAt.",
		osRotateToken},
	{"RotateUsed",
		"Rotating a used refresh token returns store.ErrConflict with the approval filled in, and stores none of the new tokens.",
		osRotateUsed},
	{"RotateNotRefreshable",
		"Rotating an access token, an expired refresh token or an unknown hash returns store.ErrNotFound and stores nothing.",
		osRotateNotRefreshable},
	{"RevokeApproval",
		"Once an approval is revoked, its code, its tokens and its refresh are store.ErrNotFound, and no token can be issued from it.",
		osRevokeApproval},
	{"RevokeTwice",
		"Revoking a revoked approval is not an error.",
		osRevokeTwice},
	{"RevokeMissing",
		"RevokeApproval of an unknown id returns store.ErrNotFound that names the id.",
		osRevokeMissing},
	{"DeleteExpired",
		"DeleteExpired removes expired approvals with their codes and tokens, expired tokens, and old clients without approvals, and nothing else.",
		osDeleteExpired},
	{"NoAliasing",
		"The store keeps no reference to values passed in or returned: changing them afterwards changes nothing stored.",
		osNoAliasing},
	{"CanceledContext",
		"Every method given a canceled context returns an error matching context.Canceled and changes nothing.",
		osCanceledContext},
	{"ConcurrentRedeem",
		"Of many goroutines redeeming one code at once, exactly one succeeds, the others get store.ErrConflict, and the approval ends revoked: each of them was a replay.",
		osConcurrentRedeem},
	{"ConcurrentRotate",
		"Of many goroutines rotating one refresh token at once, exactly one succeeds, the others get store.ErrConflict, and only the winner's tokens exist.",
		osConcurrentRotate},
}

// newOAuthHash returns a random hash, as of a fresh secret.
func newOAuthHash() oauthstore.Hash {
	var h oauthstore.Hash
	rand.Read(h[:])
	return h
}

// oauthFixture is an approval with its code, not yet stored.
type oauthFixture struct {
	approval oauthstore.Approval
	code     oauthstore.Code
}

func newApproval(n ids, label string) oauthFixture {
	a := oauthstore.Approval{
		ID:        n.id("apv-" + label),
		ClientID:  n.id("client"),
		KeyID:     n.id("key"),
		AccountID: n.id("acct"),
		Resource:  "https://api.example.com/v1/mcp",
		Scopes:    []string{"mcp"},
		CreatedAt: t0,
		ExpiresAt: at(10 * time.Minute),
	}
	c := oauthstore.Code{
		Hash:        newOAuthHash(),
		ApprovalID:  a.ID,
		RedirectURI: "http://127.0.0.1:8976/callback",
		Challenge:   "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		ExpiresAt:   at(time.Minute),
	}
	return oauthFixture{a, c}
}

func createApproval(t *testing.T, s oauthstore.Store, n ids, label string) oauthFixture {
	t.Helper()
	f := newApproval(n, label)
	must(t, "CreateApproval", s.CreateApproval(t.Context(), f.approval, f.code))
	return f
}

// tokenPair returns an access token and a refresh token of an approval, issued at
// issued.
func tokenPair(approvalID string, issued time.Time) []oauthstore.Token {
	return []oauthstore.Token{
		{Hash: newOAuthHash(), ApprovalID: approvalID, Kind: oauthstore.AccessToken, ExpiresAt: issued.Add(time.Hour)},
		{Hash: newOAuthHash(), ApprovalID: approvalID, Kind: oauthstore.RefreshToken, ExpiresAt: issued.Add(30 * 24 * time.Hour)},
	}
}

// issue creates an approval, redeems its code and issues a token pair at t0.
func issue(t *testing.T, s oauthstore.Store, n ids, label string) (oauthFixture, []oauthstore.Token) {
	t.Helper()
	f := createApproval(t, s, n, label)
	_, _, err := s.RedeemCode(t.Context(), f.code.Hash, t0)
	must(t, "RedeemCode", err)
	tokens := tokenPair(f.approval.ID, t0)
	must(t, "IssueTokens", s.IssueTokens(t.Context(), f.approval.ID, tokens, t0))
	f.approval.ExpiresAt = tokens[1].ExpiresAt
	return f, tokens
}

func checkClient(t *testing.T, op string, got, want oauthstore.Client) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || !slices.Equal(got.RedirectURIs, want.RedirectURIs) || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("%s = %+v, want %+v", op, got, want)
	}
}

func checkApproval(t *testing.T, op string, got, want oauthstore.Approval) {
	t.Helper()
	if got.ID != want.ID || got.ClientID != want.ClientID || got.KeyID != want.KeyID || got.AccountID != want.AccountID ||
		got.Resource != want.Resource || !slices.Equal(got.Scopes, want.Scopes) || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || !got.RevokedAt.Equal(want.RevokedAt) {
		t.Errorf("%s: approval = %+v, want %+v", op, got, want)
	}
}

func checkCode(t *testing.T, op string, got, want oauthstore.Code) {
	t.Helper()
	if got.Hash != want.Hash || got.ApprovalID != want.ApprovalID || got.RedirectURI != want.RedirectURI ||
		got.Challenge != want.Challenge || !got.ExpiresAt.Equal(want.ExpiresAt) || got.Redeemed != want.Redeemed {
		t.Errorf("%s: code = %+v, want %+v", op, got, want)
	}
}

func checkToken(t *testing.T, op string, got, want oauthstore.Token) {
	t.Helper()
	if got.Hash != want.Hash || got.ApprovalID != want.ApprovalID || got.Kind != want.Kind ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || got.Used != want.Used {
		t.Errorf("%s: token = %+v, want %+v", op, got, want)
	}
}

// wantToken checks that Token at now returns want and its approval.
func wantToken(t *testing.T, s oauthstore.Store, want oauthstore.Token, approval oauthstore.Approval, now time.Time) {
	t.Helper()
	got, a, err := s.Token(t.Context(), want.Hash, now)
	if err != nil {
		t.Errorf("Token: unexpected error %v", err)
		return
	}
	checkToken(t, "Token", got, want)
	checkApproval(t, "Token", a, approval)
}

// wantNoToken checks that Token at now finds nothing.
func wantNoToken(t *testing.T, s oauthstore.Store, h oauthstore.Hash, now time.Time, what string) {
	t.Helper()
	_, _, err := s.Token(t.Context(), h, now)
	wantErr(t, "Token of "+what, err, store.ErrNotFound)
}

func osClientCreateThenRead(t *testing.T, s oauthstore.Store) {
	n := newIDs()
	c := oauthstore.Client{ID: n.id("client"), Name: "Claude «test»", RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback", "http://127.0.0.1/cb"}, CreatedAt: t0}
	must(t, "CreateClient", s.CreateClient(t.Context(), c))
	got, err := s.Client(t.Context(), c.ID)
	must(t, "Client", err)
	checkClient(t, "Client", got, c)
}

func osClientMissing(t *testing.T, s oauthstore.Store) {
	id := newIDs().id("nobody")
	_, err := s.Client(t.Context(), id)
	wantNamed(t, "Client", err, store.ErrNotFound, id)
}

func osClientDuplicate(t *testing.T, s oauthstore.Store) {
	n := newIDs()
	first := oauthstore.Client{ID: n.id("client"), Name: "first", RedirectURIs: []string{"https://a.example/cb"}, CreatedAt: t0}
	second := oauthstore.Client{ID: first.ID, Name: "second", RedirectURIs: []string{"https://b.example/cb"}, CreatedAt: at(time.Second)}
	must(t, "CreateClient", s.CreateClient(t.Context(), first))
	wantNamed(t, "CreateClient duplicate", s.CreateClient(t.Context(), second), store.ErrConflict, first.ID)
	got, err := s.Client(t.Context(), first.ID)
	must(t, "Client", err)
	checkClient(t, "Client", got, first)
}

func osRedeemCode(t *testing.T, s oauthstore.Store) {
	f := createApproval(t, s, newIDs(), "a")
	c, a, err := s.RedeemCode(t.Context(), f.code.Hash, t0)
	must(t, "RedeemCode", err)
	checkCode(t, "RedeemCode", c, redeemed(f.code))
	checkApproval(t, "RedeemCode", a, f.approval)
}

// redeemed returns c marked redeemed.
func redeemed(c oauthstore.Code) oauthstore.Code {
	c.Redeemed = true
	return c
}

func osCodeRead(t *testing.T, s oauthstore.Store) {
	ctx, n := t.Context(), newIDs()
	f := createApproval(t, s, n, "a")
	c, a, err := s.Code(ctx, f.code.Hash, t0)
	must(t, "Code", err)
	checkCode(t, "Code", c, f.code)
	checkApproval(t, "Code", a, f.approval)
	_, _, err = s.RedeemCode(ctx, f.code.Hash, t0)
	must(t, "RedeemCode", err)
	c, a, err = s.Code(ctx, f.code.Hash, at(time.Second))
	must(t, "Code of a redeemed code", err)
	checkCode(t, "Code of a redeemed code", c, redeemed(f.code))
	checkApproval(t, "Code of a redeemed code", a, f.approval)

	_, _, err = s.Code(ctx, f.code.Hash, f.code.ExpiresAt)
	wantErr(t, "Code at ExpiresAt", err, store.ErrNotFound)
	_, _, err = s.Code(ctx, newOAuthHash(), t0)
	wantErr(t, "Code of an unknown hash", err, store.ErrNotFound)
	g := createApproval(t, s, n, "b")
	must(t, "RevokeApproval", s.RevokeApproval(ctx, g.approval.ID, t0))
	_, _, err = s.Code(ctx, g.code.Hash, t0)
	wantErr(t, "Code of a revoked approval", err, store.ErrNotFound)
}

func osBadExchangeKeepsCode(t *testing.T, s oauthstore.Store) {
	ctx := t.Context()
	f := createApproval(t, s, newIDs(), "a")
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			if _, _, err := s.Code(ctx, f.code.Hash, at(time.Second)); err != nil {
				t.Errorf("Code: unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	c, a, err := s.RedeemCode(ctx, f.code.Hash, at(2*time.Second))
	must(t, "RedeemCode after reads", err)
	checkCode(t, "RedeemCode after reads", c, redeemed(f.code))
	checkApproval(t, "RedeemCode after reads", a, f.approval)
	tokens := tokenPair(f.approval.ID, at(2*time.Second))
	must(t, "IssueTokens", s.IssueTokens(ctx, f.approval.ID, tokens, at(2*time.Second)))
}

func osRedeemTwice(t *testing.T, s oauthstore.Store) {
	ctx := t.Context()
	f, tokens := issue(t, s, newIDs(), "a")
	replayed := f.approval
	replayed.RevokedAt = at(time.Second)
	for i, when := range []time.Time{at(time.Second), at(2 * time.Second)} {
		op := fmt.Sprintf("RedeemCode replay %d", i+1)
		c, a, err := s.RedeemCode(ctx, f.code.Hash, when)
		wantErr(t, op, err, store.ErrConflict)
		checkCode(t, op, c, redeemed(f.code))
		checkApproval(t, op, a, replayed)
	}
	for _, tok := range tokens {
		wantNoToken(t, s, tok.Hash, at(3*time.Second), "a token of a replayed code")
	}
	next := tokenPair(f.approval.ID, at(3*time.Second))
	wantErr(t, "IssueTokens after a replay", s.IssueTokens(ctx, f.approval.ID, next, at(3*time.Second)), store.ErrNotFound)
	_, _, err := s.Code(ctx, f.code.Hash, at(3*time.Second))
	wantErr(t, "Code after a replay", err, store.ErrNotFound)
}

func osRedeemExpired(t *testing.T, s oauthstore.Store) {
	n := newIDs()
	f := createApproval(t, s, n, "a")
	_, _, err := s.RedeemCode(t.Context(), f.code.Hash, f.code.ExpiresAt)
	wantErr(t, "RedeemCode at ExpiresAt", err, store.ErrNotFound)
	g := createApproval(t, s, n, "b")
	_, _, err = s.RedeemCode(t.Context(), g.code.Hash, g.code.ExpiresAt.Add(-time.Second))
	must(t, "RedeemCode a second before ExpiresAt", err)
}

func osRedeemUnknown(t *testing.T, s oauthstore.Store) {
	createApproval(t, s, newIDs(), "a")
	_, _, err := s.RedeemCode(t.Context(), newOAuthHash(), t0)
	wantErr(t, "RedeemCode", err, store.ErrNotFound)
}

func osApprovalDuplicateID(t *testing.T, s oauthstore.Store) {
	n := newIDs()
	f := createApproval(t, s, n, "a")
	g := newApproval(n, "a")
	g.approval.KeyID = n.id("other-key")
	wantNamed(t, "CreateApproval duplicate id", s.CreateApproval(t.Context(), g.approval, g.code), store.ErrConflict, f.approval.ID)
	_, _, err := s.RedeemCode(t.Context(), g.code.Hash, t0)
	wantErr(t, "RedeemCode of the refused approval's code", err, store.ErrNotFound)
	_, a, err := s.RedeemCode(t.Context(), f.code.Hash, t0)
	must(t, "RedeemCode of the first code", err)
	checkApproval(t, "RedeemCode of the first code", a, f.approval)
}

func osApprovalDuplicateCode(t *testing.T, s oauthstore.Store) {
	n := newIDs()
	f := createApproval(t, s, n, "a")
	g := newApproval(n, "b")
	g.code.Hash = f.code.Hash
	wantErr(t, "CreateApproval duplicate code", s.CreateApproval(t.Context(), g.approval, g.code), store.ErrConflict)
	wantErr(t, "RevokeApproval of the refused approval", s.RevokeApproval(t.Context(), g.approval.ID, t0), store.ErrNotFound)
	_, a, err := s.RedeemCode(t.Context(), f.code.Hash, t0)
	must(t, "RedeemCode", err)
	checkApproval(t, "RedeemCode", a, f.approval)
}

func osIssueTokens(t *testing.T, s oauthstore.Store) {
	f, tokens := issue(t, s, newIDs(), "a")
	for _, tok := range tokens {
		wantToken(t, s, tok, f.approval, at(time.Minute))
	}
}

func osIssueTokensDeadApproval(t *testing.T, s oauthstore.Store) {
	n := newIDs()
	tokens := tokenPair(n.id("nobody"), t0)
	wantErr(t, "IssueTokens of an unknown approval", s.IssueTokens(t.Context(), n.id("nobody"), tokens, t0), store.ErrNotFound)
	f := createApproval(t, s, n, "a")
	must(t, "RevokeApproval", s.RevokeApproval(t.Context(), f.approval.ID, t0))
	tokens = append(tokens, tokenPair(f.approval.ID, t0)...)
	wantErr(t, "IssueTokens of a revoked approval", s.IssueTokens(t.Context(), f.approval.ID, tokens[2:], t0), store.ErrNotFound)
	for _, tok := range tokens {
		wantNoToken(t, s, tok.Hash, t0, "a refused token")
	}
}

func osTokenExpired(t *testing.T, s oauthstore.Store) {
	f, tokens := issue(t, s, newIDs(), "a")
	access := tokens[0]
	wantToken(t, s, access, f.approval, access.ExpiresAt.Add(-time.Second))
	wantNoToken(t, s, access.Hash, access.ExpiresAt, "an access token at its ExpiresAt")
	wantToken(t, s, tokens[1], f.approval, access.ExpiresAt)
}

func osTokenByHashOnly(t *testing.T, s oauthstore.Store) {
	_, tokens := issue(t, s, newIDs(), "a")
	for _, tok := range tokens {
		h := tok.Hash
		h[len(h)-1] ^= 1
		wantNoToken(t, s, h, t0, "a hash one bit off")
	}
}

func osRotateToken(t *testing.T, s oauthstore.Store) {
	f, tokens := issue(t, s, newIDs(), "a")
	when := at(2 * time.Hour)
	next := tokenPair(f.approval.ID, when)
	a, err := s.RotateToken(t.Context(), tokens[1].Hash, next, when)
	must(t, "RotateToken", err)
	f.approval.ExpiresAt = next[1].ExpiresAt
	checkApproval(t, "RotateToken", a, f.approval)
	used := tokens[1]
	used.Used = true
	wantToken(t, s, used, f.approval, when)
	for _, tok := range next {
		wantToken(t, s, tok, f.approval, when)
	}
}

func osRotateUsed(t *testing.T, s oauthstore.Store) {
	f, tokens := issue(t, s, newIDs(), "a")
	first := tokenPair(f.approval.ID, at(time.Hour))
	_, err := s.RotateToken(t.Context(), tokens[1].Hash, first, at(time.Hour))
	must(t, "RotateToken", err)
	f.approval.ExpiresAt = first[1].ExpiresAt
	again := tokenPair(f.approval.ID, at(2*time.Hour))
	a, err := s.RotateToken(t.Context(), tokens[1].Hash, again, at(2*time.Hour))
	wantErr(t, "RotateToken of a used token", err, store.ErrConflict)
	checkApproval(t, "RotateToken of a used token", a, f.approval)
	for _, tok := range again {
		wantNoToken(t, s, tok.Hash, at(2*time.Hour), "a token of a refused rotation")
	}
}

func osRotateNotRefreshable(t *testing.T, s oauthstore.Store) {
	f, tokens := issue(t, s, newIDs(), "a")
	cases := []struct {
		what string
		old  oauthstore.Hash
		now  time.Time
	}{
		{"an access token", tokens[0].Hash, at(time.Minute)},
		{"an expired refresh token", tokens[1].Hash, tokens[1].ExpiresAt},
		{"an unknown hash", newOAuthHash(), at(time.Minute)},
	}
	for _, c := range cases {
		next := tokenPair(f.approval.ID, c.now)
		_, err := s.RotateToken(t.Context(), c.old, next, c.now)
		wantErr(t, "RotateToken of "+c.what, err, store.ErrNotFound)
		for _, tok := range next {
			wantNoToken(t, s, tok.Hash, c.now, "a token of a refused rotation")
		}
	}
	wantToken(t, s, tokens[1], f.approval, at(time.Minute))
}

func osRevokeApproval(t *testing.T, s oauthstore.Store) {
	ctx, n := t.Context(), newIDs()
	f, tokens := issue(t, s, n, "a")
	g := createApproval(t, s, n, "b")
	must(t, "RevokeApproval", s.RevokeApproval(ctx, f.approval.ID, at(time.Minute)))
	must(t, "RevokeApproval", s.RevokeApproval(ctx, g.approval.ID, at(time.Minute)))
	for _, tok := range tokens {
		wantNoToken(t, s, tok.Hash, at(time.Minute), "a revoked approval")
	}
	_, _, err := s.RedeemCode(ctx, g.code.Hash, at(time.Second))
	wantErr(t, "RedeemCode of a revoked approval", err, store.ErrNotFound)
	next := tokenPair(f.approval.ID, at(time.Minute))
	_, err = s.RotateToken(ctx, tokens[1].Hash, next, at(time.Minute))
	wantErr(t, "RotateToken of a revoked approval", err, store.ErrNotFound)
	wantErr(t, "IssueTokens of a revoked approval", s.IssueTokens(ctx, g.approval.ID, tokenPair(g.approval.ID, t0), t0), store.ErrNotFound)
}

func osRevokeTwice(t *testing.T, s oauthstore.Store) {
	f := createApproval(t, s, newIDs(), "a")
	must(t, "RevokeApproval", s.RevokeApproval(t.Context(), f.approval.ID, at(time.Second)))
	must(t, "RevokeApproval again", s.RevokeApproval(t.Context(), f.approval.ID, at(2*time.Second)))
}

func osRevokeMissing(t *testing.T, s oauthstore.Store) {
	id := newIDs().id("nobody")
	wantNamed(t, "RevokeApproval", s.RevokeApproval(t.Context(), id, t0), store.ErrNotFound, id)
}

func osDeleteExpired(t *testing.T, s oauthstore.Store) {
	ctx, n := t.Context(), newIDs()
	oldUnused := oauthstore.Client{ID: n.id("old-unused"), RedirectURIs: []string{"https://a.example/cb"}, CreatedAt: t0}
	oldUsed := oauthstore.Client{ID: n.id("client"), RedirectURIs: []string{"https://a.example/cb"}, CreatedAt: t0}
	newUnused := oauthstore.Client{ID: n.id("new-unused"), RedirectURIs: []string{"https://a.example/cb"}, CreatedAt: at(48 * time.Hour)}
	for _, c := range []oauthstore.Client{oldUnused, oldUsed, newUnused} {
		must(t, "CreateClient", s.CreateClient(ctx, c))
	}
	live, tokens := issue(t, s, n, "live")    // expires with its refresh token, in 30 days
	stale := createApproval(t, s, n, "stale") // never redeemed: expires after 10 minutes
	now, unusedSince := at(49*time.Hour), at(24*time.Hour)
	must(t, "DeleteExpired", s.DeleteExpired(ctx, now, unusedSince))

	_, err := s.Client(ctx, oldUnused.ID)
	wantErr(t, "Client deleted as unused", err, store.ErrNotFound)
	for _, c := range []oauthstore.Client{oldUsed, newUnused} {
		_, err := s.Client(ctx, c.ID)
		must(t, "Client "+c.ID, err)
	}
	wantErr(t, "RevokeApproval of a deleted approval", s.RevokeApproval(ctx, stale.approval.ID, now), store.ErrNotFound)
	wantNoToken(t, s, tokens[0].Hash, now, "an expired access token")
	wantToken(t, s, tokens[1], live.approval, now)
}

func osNoAliasing(t *testing.T, s oauthstore.Store) {
	ctx, n := t.Context(), newIDs()
	c := oauthstore.Client{ID: n.id("client"), RedirectURIs: []string{"https://a.example/cb"}, CreatedAt: t0}
	must(t, "CreateClient", s.CreateClient(ctx, c))
	c.RedirectURIs[0] = "https://evil.example/cb"
	got, err := s.Client(ctx, c.ID)
	must(t, "Client", err)
	got.RedirectURIs[0] = "https://evil.example/cb"
	got, err = s.Client(ctx, c.ID)
	must(t, "Client", err)
	if got.RedirectURIs[0] != "https://a.example/cb" {
		t.Errorf("Client redirect URI = %q after changing a value passed in or returned, want it unchanged", got.RedirectURIs[0])
	}

	f := newApproval(n, "a")
	must(t, "CreateApproval", s.CreateApproval(ctx, f.approval, f.code))
	f.approval.Scopes[0] = "admin"
	_, a, err := s.RedeemCode(ctx, f.code.Hash, t0)
	must(t, "RedeemCode", err)
	a.Scopes[0] = "admin"
	tokens := tokenPair(f.approval.ID, t0)
	must(t, "IssueTokens", s.IssueTokens(ctx, f.approval.ID, tokens, t0))
	_, a, err = s.Token(ctx, tokens[0].Hash, t0)
	must(t, "Token", err)
	if !slices.Equal(a.Scopes, []string{"mcp"}) {
		t.Errorf("approval scopes = %q after changing a value passed in or returned, want [mcp]", a.Scopes)
	}
}

func osCanceledContext(t *testing.T, s oauthstore.Store) {
	ctx, n := canceled(t), newIDs()
	f, tokens := issue(t, s, n, "a")
	g := createApproval(t, s, n, "b")
	h := newApproval(n, "c")
	c := oauthstore.Client{ID: n.id("client"), RedirectURIs: []string{"https://a.example/cb"}, CreatedAt: t0}
	next := tokenPair(f.approval.ID, t0)

	wantErr(t, "CreateClient", s.CreateClient(ctx, c), context.Canceled)
	_, err := s.Client(ctx, c.ID)
	wantErr(t, "Client", err, context.Canceled)
	wantErr(t, "CreateApproval", s.CreateApproval(ctx, h.approval, h.code), context.Canceled)
	_, _, err = s.Code(ctx, g.code.Hash, t0)
	wantErr(t, "Code", err, context.Canceled)
	_, _, err = s.RedeemCode(ctx, g.code.Hash, t0)
	wantErr(t, "RedeemCode", err, context.Canceled)
	wantErr(t, "IssueTokens", s.IssueTokens(ctx, f.approval.ID, next, t0), context.Canceled)
	_, _, err = s.Token(ctx, tokens[0].Hash, t0)
	wantErr(t, "Token", err, context.Canceled)
	_, err = s.RotateToken(ctx, tokens[1].Hash, next, t0)
	wantErr(t, "RotateToken", err, context.Canceled)
	wantErr(t, "RevokeApproval", s.RevokeApproval(ctx, f.approval.ID, t0), context.Canceled)
	wantErr(t, "DeleteExpired", s.DeleteExpired(ctx, at(365*24*time.Hour), at(365*24*time.Hour)), context.Canceled)

	live := t.Context()
	_, err = s.Client(live, c.ID)
	wantErr(t, "Client created with a canceled context", err, store.ErrNotFound)
	_, _, err = s.RedeemCode(live, h.code.Hash, t0)
	wantErr(t, "RedeemCode of an approval created with a canceled context", err, store.ErrNotFound)
	_, _, err = s.RedeemCode(live, g.code.Hash, t0)
	must(t, "RedeemCode of a code redeemed with a canceled context", err)
	for _, tok := range next {
		wantNoToken(t, s, tok.Hash, t0, "a token issued with a canceled context")
	}
	wantToken(t, s, tokens[0], f.approval, t0)
	wantToken(t, s, tokens[1], f.approval, t0)
}

func osConcurrentRedeem(t *testing.T, s oauthstore.Store) {
	f := createApproval(t, s, newIDs(), "a")
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { _, _, errs[i] = s.RedeemCode(t.Context(), f.code.Hash, t0) })
	}
	wg.Wait()
	oneWinner(t, "RedeemCode", errs)
	_, _, err := s.Code(t.Context(), f.code.Hash, t0)
	wantErr(t, "Code after concurrent redemptions", err, store.ErrNotFound)
	wantErr(t, "IssueTokens after concurrent redemptions", s.IssueTokens(t.Context(), f.approval.ID, tokenPair(f.approval.ID, t0), t0), store.ErrNotFound)
}

func osConcurrentRotate(t *testing.T, s oauthstore.Store) {
	f, tokens := issue(t, s, newIDs(), "a")
	when := at(time.Hour)
	next := make([][]oauthstore.Token, workers)
	for i := range next {
		next[i] = tokenPair(f.approval.ID, when)
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { _, errs[i] = s.RotateToken(t.Context(), tokens[1].Hash, next[i], when) })
	}
	wg.Wait()
	winner := oneWinner(t, "RotateToken", errs)
	if winner < 0 {
		return
	}
	f.approval.ExpiresAt = next[winner][1].ExpiresAt
	for i, pair := range next {
		for _, tok := range pair {
			if i == winner {
				wantToken(t, s, tok, f.approval, when)
			} else {
				wantNoToken(t, s, tok.Hash, when, fmt.Sprintf("a token of losing rotation %d", i))
			}
		}
	}
}
