package accounts_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
)

// TestDisplayTextIsPrintable checks that the text a key holder or an operator gives
// to be shown to others (a key's name, a credit adjustment's reason) is refused when it
// holds invisible formatting characters (bidirectional controls, zero-width
// characters) or a stack of combining marks, with which a name could display as
// "primary", as OAuth client names are; the message names the field. Printable text in
// any script passes.
func TestDisplayTextIsPrintable(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := t.Context()
	primary := keyCaller(h.key, netip.Addr{})
	own, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, text string }{
		{"right-to-left override", "\u202Eyramirp"},
		{"right-to-left isolate", "ci\u2067yramirp\u2069"},
		{"zero-width space", "primary\u200B"},
		{"zero-width joiner", "pri\u200Dmary"},
		{"byte order mark", "\uFEFFprimary"},
		{"soft hyphen", "pri\u00ADmary"},
		{"stacked combining marks", "pr" + "i" + strings.Repeat("\u0301", 5) + "mary"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantRefused := func(what string, err error, field string) {
				t.Helper()
				if tollgate.CodeOf(err) != tollgate.CodeInvalidInput || !strings.HasPrefix(err.Error(), field+": ") ||
					!strings.Contains(err.Error(), "printable text") {
					t.Errorf("%s with %q: %v, want invalid_input naming %s", what, tt.text, err, field)
				}
			}
			_, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: tt.text})
			wantRefused("CreateOwnKey", err, "name")
			_, _, err = h.mgr.CreateKey(ctx, "acct", accounts.NewKey{Name: tt.text})
			wantRefused("CreateKey", err, "name")
			_, err = h.mgr.UpdateOwnKey(ctx, primary, own.ID, accounts.KeyChange{Name: &tt.text})
			wantRefused("UpdateOwnKey", err, "name")
			_, err = h.mgr.AdjustCredits(ctx, "acct", 1, tt.text, nil)
			wantRefused("AdjustCredits", err, "reason")
		})
	}
	for _, name := range []string{"ordinateur portable", "ноутбук", "笔记本电脑", "Tiếng Việt", "CI (nightly) — build #4"} {
		if _, _, err := h.mgr.CreateOwnKey(ctx, primary, accounts.NewKey{Name: name}); err != nil {
			t.Errorf("CreateOwnKey(%q): %v", name, err)
		}
	}
}
