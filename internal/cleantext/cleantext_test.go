package cleantext

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestMessage(t *testing.T) {
	long := strings.Repeat("é", MaxMessage) // 2 bytes each
	tests := []struct {
		name, in, want string
	}{
		{"clean", `Cannot query field "x" on type "Query".`, `Cannot query field "x" on type "Query".`},
		{"clean, not ASCII", "le champ « x » est inconnu", "le champ « x » est inconnu"},
		{"graphql-go's unknown fragment type",
			`Fragment "F" cannot be spread here as objects of type "Query" can never be of type %!q(<nil>).`,
			`Fragment "F" cannot be spread here as objects of type "Query" can never be of an unknown type.`},
		{"both types unknown",
			`Fragment "F" cannot be spread here as objects of type %!q(<nil>) can never be of type %!q(<nil>).`,
			`Fragment "F" cannot be spread here as objects of an unknown type can never be of an unknown type.`},
		{"a wrong type", `count %!d(string=ten) is too big`, `count ten is too big`},
		{"a missing argument", `the value %!v(MISSING) is wrong`, `the value  is wrong`},
		{"an extra argument", `done%!(EXTRA int=1)`, `done`},
		{"no verb", `100%!(NOVERB)`, `100`},
		{"a value with parentheses", `x %!d(string=(a)) y`, `x % d(string=(a)) y`},
		{"a mark in a mark", `%!d(a=%!q(<nil>))`, `% d(a=an unknown type)`},
		{"line breaks", "Variable \"$v\" has invalid value.\nField \"x\" is not defined.", `Variable "$v" has invalid value. Field "x" is not defined.`},
		{"control characters", "a\x00b\x1bc\x7fd", "a\uFFFDb\uFFFDc\uFFFDd"},
		{"invisible formatting", "abc\u202Egpj.exe\u200B", "abc\uFFFDgpj.exe\uFFFD"},
		{"invalid UTF-8", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"trailing line break", "refused\n", "refused"},
		{"too long", long, long[:MaxMessage] + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Message(tt.in); got != tt.want {
				t.Errorf("Message(%q)\n = %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestMessageCleanDoesNotAllocate(t *testing.T) {
	msg := `Cannot query field "x" on type "Query". Did you mean "y"?`
	if n := testing.AllocsPerRun(100, func() { _ = Message(msg) }); n != 0 {
		t.Errorf("%v allocations for a clean message", n)
	}
}

// FuzzMessage checks that every message comes out clean (valid UTF-8, no fmt marks,
// no control or formatting characters, bounded), that clean text is kept, and that
// cleaning twice changes nothing.
//
//	go test -run='^$' -fuzz=FuzzMessage -fuzztime=30s ./internal/cleantext/
func FuzzMessage(f *testing.F) {
	for _, s := range []string{
		"", "ok", "%!q(<nil>)", "of type %!q(<nil>).", "%!d(string=x)", "%!(EXTRA a=b, c=d)", "%!", "%!(",
		"a\nb\r\tc", "\x00\xff\u202e", strings.Repeat("x", MaxMessage+1), "type %!q(<nil>) type %!s(<nil>)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Message(in)
		if !utf8.ValidString(out) || strings.Contains(out, "%!") {
			t.Fatalf("Message(%q) = %q", in, out)
		}
		for _, r := range out {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("Message(%q) = %q holds %U", in, out, r)
			}
		}
		if len(out) > MaxMessage+len("...") {
			t.Fatalf("Message(%q) is %d bytes", in, len(out))
		}
		if clean(in) && out != in {
			t.Fatalf("clean %q became %q", in, out)
		}
		if again := Message(out); again != out {
			t.Fatalf("Message(%q) = %q, then %q", in, out, again)
		}
	})
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"", true},
		{"primary", true},
		{"ordinateur portable", true},
		{"笔记本电脑", true},
		{"Tiếng Việt", true},
		{"a" + strings.Repeat("\u0301", MaxMarks), true},
		{"a" + strings.Repeat("\u0301", MaxMarks+1), false},
		{"a\u0301b\u0301\u0301\u0301\u0301", true}, // the count restarts at each letter
		{"line\nbreak", false},
		{"nul\x00", false},
		{"\u202Eyramirp", false},   // right-to-left override
		{"ci\u2067x\u2069", false}, // right-to-left isolate
		{"primary\u200B", false},   // zero-width space
		{"pri\u200Dmary", false},   // zero-width joiner
		{"\uFEFFprimary", false},   // byte order mark
		{"pri\u00ADmary", false},   // soft hyphen
		{"\xff", false},            // invalid UTF-8
		{"a\u0085b", false},        // next line (C1 control)
	} {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
