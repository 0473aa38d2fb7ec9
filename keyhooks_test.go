package tollgate_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
)

// TestOnKeyChange checks that rotations and revocations made through a service are
// reported to its hooks before the call returns, that failed changes are not, and that
// cancel stops the calls, even from inside a hook.
func TestOnKeyChange(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOptions{})
	info, err := h.svc.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	primary := info.Keys[0].ID
	sub, _, err := h.svc.CreateKey(ctx, "acct", auth.NewKey{Name: "sub"})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []string
	record := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, id)
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	cancel := h.svc.OnKeyChange(record)
	second := h.svc.OnKeyChange(record) // two hooks: each is called

	if _, _, err := h.svc.RotateKey(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if g := seen(); !slices.Equal(g, []string{primary, primary}) {
		t.Fatalf("after a rotation the hooks saw %q, want the key id twice", g)
	}
	second()
	if _, err := h.svc.RevokeKey(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	if g := seen(); !slices.Equal(g, []string{primary, primary, sub.ID}) {
		t.Fatalf("after a revocation the hooks saw %q", g)
	}
	// A change that fails is not reported.
	if _, err := h.svc.RevokeKey(ctx, "key_missing"); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Fatalf("revoking a missing key: %v", err)
	}
	if _, _, err := h.svc.RotateKey(ctx, "key_missing"); tollgate.CodeOf(err) != tollgate.CodeNotFound {
		t.Fatalf("rotating a missing key: %v", err)
	}
	// A hook may cancel itself while it runs.
	var selfCancel func()
	calls := 0
	selfCancel = h.svc.OnKeyChange(func(string) { calls++; selfCancel() })
	cancel()
	for range 2 {
		if _, _, err := h.svc.RotateKey(ctx, primary); err != nil {
			t.Fatal(err)
		}
	}
	if g := seen(); len(g) != 3 {
		t.Fatalf("a cancelled hook was called: %q", g)
	}
	if calls != 1 {
		t.Fatalf("the self-cancelling hook ran %d times, want 1", calls)
	}
}
