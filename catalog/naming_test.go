package catalog_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/catalog"
)

// TestRootFieldName checks naming rule 1 (lowercase, hyphens removed) and rule 4 (a
// leading digit gets an underscore) on API ids, including every sample API.
func TestRootFieldName(t *testing.T) {
	tests := []struct{ id, want string }{
		{"date-info", "dateinfo"},
		{"uuid-generator", "uuidgenerator"},
		{"hash", "hash"},
		{"hmac", "hmac"},
		{"echo", "echo"},
		{"image-info", "imageinfo"},
		{"a-b-c-d", "abcd"},
		{"1password", "_1password"},
		{"3d-model", "_3dmodel"},
		{"42", "_42"},
		{"x1-2", "x12"},
		{"Date-Info", "dateinfo"}, // lowercased, though Compile refuses such an id
	}
	for _, tt := range tests {
		if got := catalog.RootFieldName(tt.id); got != tt.want {
			t.Errorf("RootFieldName(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

// TestGraphQLName checks naming rules 2 to 4 on parameter and result field names.
func TestGraphQLName(t *testing.T) {
	tests := []struct{ name, want string }{
		// The date-info result fields of the sample catalog.
		{"date", "date"},
		{"day-of-week", "day_of_week"},
		{"iso:week", "iso_week"},
		{"unix.seconds", "unix_seconds"},
		{"quarter/year", "quarter_year"},
		{"1st-of-month", "_1st_of_month"},
		{"is leap year", "isleapyear"},
		// Underscores count as alphanumeric.
		{"delay_ms", "delay_ms"},
		{"_private", "_private"},
		// Rule 2, each of - + : . / \ .
		{"a-b", "a_b"},
		{"a+b", "a_b"},
		{"a:b", "a_b"},
		{"a.b", "a_b"},
		{"a/b", "a_b"},
		{`a\b`, "a_b"},
		{"a--b", "a__b"},
		{"-x", "_x"},
		{"x-", "x_"},
		// Rule 3: anything else is dropped, including non-ASCII letters.
		{"héllo", "hllo"},
		{"naïve-count", "nave_count"},
		{"日本", ""},
		{"a b\tc", "abc"},
		{"price($)", "price"},
		{"a@b#c!", "abc"},
		{"e\u0301", "e"},
		{"", ""},
		{"   ", ""},
		// Rule 4, also after rule 3 exposed a digit.
		{"1st", "_1st"},
		{"9", "_9"},
		{"é1x", "_1x"},
		{" 2x", "_2x"},
		{"_1", "_1"},
		// Case is kept.
		{"CamelCase", "CamelCase"},
		{"Content-Type", "Content_Type"},
	}
	for _, tt := range tests {
		if got := catalog.GraphQLName(tt.name); got != tt.want {
			t.Errorf("GraphQLName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzGraphQLName checks that GraphQLName never panics, yields only [A-Za-z0-9_],
// never starts with a digit, is idempotent, and that RootFieldName agrees with it.
func FuzzGraphQLName(f *testing.F) {
	for _, s := range []string{
		"day-of-week", "iso:week", "unix.seconds", "quarter/year", "1st-of-month",
		"is leap year", "delay_ms", `a\b`, "a+b", "héllo", "日本", "", "0", "__typename",
		"\xff\xfe", "-1", "é1", "a\x00b", strings.Repeat("-", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := catalog.GraphQLName(s)
		for i := 0; i < len(got); i++ {
			c := got[i]
			if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				t.Fatalf("GraphQLName(%q) = %q holds %q", s, got, c)
			}
		}
		if got != "" && '0' <= got[0] && got[0] <= '9' {
			t.Fatalf("GraphQLName(%q) = %q starts with a digit", s, got)
		}
		if got != "" {
			if again := catalog.GraphQLName(got); again != got {
				t.Fatalf("GraphQLName not idempotent: %q -> %q -> %q", s, got, again)
			}
		}
		// Every ASCII letter and digit of the input survives, in order.
		var kept strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				kept.WriteByte(c)
			}
		}
		if strings.Map(func(r rune) rune {
			if r == '_' {
				return -1
			}
			return r
		}, got) != kept.String() {
			t.Fatalf("GraphQLName(%q) = %q does not keep the letters and digits %q", s, got, kept.String())
		}
		if !utf8.ValidString(got) {
			t.Fatalf("GraphQLName(%q) = %q is not valid UTF-8", s, got)
		}
		root := catalog.RootFieldName(s)
		if want := catalog.GraphQLName(strings.ReplaceAll(strings.ToLower(s), "-", "")); root != want {
			t.Fatalf("RootFieldName(%q) = %q, want %q", s, root, want)
		}
		if strings.ContainsAny(root, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Fatalf("RootFieldName(%q) = %q holds an uppercase letter", s, root)
		}
	})
}
