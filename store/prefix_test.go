package store_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/store"
)

// TestPrefixEnd checks the upper bound of the ids that begin with a prefix: the first
// string after all of them, byte-wise.
func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"ab", "ac", true},
		{"a%", "a&", true},
		{`a\`, "a]", true},
		{"aé", "aê", true},
		{"a\U0010FFFF", "b", true},
		{"a\U0010FFFF\U0010FFFF", "b", true},
		{"\U0010FFFF", "", false},
		{"a\uD7FF", "a\uE000", true},
		{"a\xff", "", false},
	} {
		end, ok := store.PrefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("store.PrefixEnd(%q) = %q, %v; want %q, %v", c.prefix, end, ok, c.end, c.ok)
		}
		if !ok {
			continue
		}
		// Every string with the prefix is before the end; the end and what follows
		// it do not have the prefix.
		for _, s := range []string{c.prefix, c.prefix + "\x00", c.prefix + "z", c.prefix + "\U0010FFFF\U0010FFFF"} {
			if s >= end {
				t.Errorf("store.PrefixEnd(%q) = %q, which is not after %q", c.prefix, end, s)
			}
		}
		if strings.HasPrefix(end, c.prefix) {
			t.Errorf("store.PrefixEnd(%q) = %q has the prefix", c.prefix, end)
		}
	}
}
