// Package brand names a service as its operator sells it: the name its customers see,
// the name of its command-line client, and the prefix of the environment variables
// that client and the generated client packages read the key and the service from. A
// host that sells its own API through Tollgate sets one Brand (on doors.Options, the
// flags of tollgate-gen, and the command it builds with package cli); the zero Brand
// is [Default], Tollgate's own names.
//
// Command and EnvPrefix end up in shell snippets, generated code and file names, so
// they are restricted to characters that are safe in all of them; Name may hold any
// printable text, and every page, document and snippet escapes it where it lands.
package brand

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// A Brand is what a service's customers see it called. The zero value means [Default].
type Brand struct {
	// Name is the name customers know the service by, such as "Acme": the title of
	// the dashboard's pages, the OpenAPI document's "Acme API catalog", the OAuth
	// consent page. At most [MaxNameLength] printable characters; spaces only
	// between words.
	Name string
	// Command is the name of the command-line client, such as "acme": the command in
	// the snippets, the MCP server's name, the prefix of the generated packages' base
	// error class (AcmeError). At most [MaxCommandLength] characters: lowercase ASCII
	// letters and digits in words joined by single hyphens, starting with a letter.
	Command string
	// EnvPrefix starts the names of the environment variables the command-line client
	// and the generated packages' examples read: "ACME" for ACME_API_KEY and
	// ACME_BASE_URL. At most [MaxEnvPrefixLength] characters: uppercase ASCII letters
	// and digits in words joined by single underscores, starting with a letter.
	EnvPrefix string
}

// Bounds of a Brand's fields.
const (
	MaxNameLength      = 64 // characters
	MaxCommandLength   = 32
	MaxEnvPrefixLength = 32
)

// Default returns Tollgate's own names: Tollgate, the tollgate command, and the
// TOLLGATE_API_KEY and TOLLGATE_BASE_URL variables.
func Default() Brand {
	return Brand{Name: "Tollgate", Command: "tollgate", EnvPrefix: "TOLLGATE"}
}

// OrDefault returns b, or [Default] for the zero Brand.
func (b Brand) OrDefault() Brand {
	if b == (Brand{}) {
		return Default()
	}
	return b
}

// KeyVar is the environment variable that holds the key: EnvPrefix + "_API_KEY".
func (b Brand) KeyVar() string { return b.OrDefault().EnvPrefix + "_API_KEY" }

// BaseURLVar is the environment variable that holds the service's root URL:
// EnvPrefix + "_BASE_URL".
func (b Brand) BaseURLVar() string { return b.OrDefault().EnvPrefix + "_BASE_URL" }

// Check reports what is wrong with b, or nil. The zero Brand is [Default]; any other
// sets all three fields.
func (b Brand) Check() error {
	if b == (Brand{}) {
		return nil
	}
	if err := CheckName(b.Name); err != nil {
		return err
	}
	if err := CheckCommand(b.Command); err != nil {
		return err
	}
	return CheckEnvPrefix(b.EnvPrefix)
}

// CheckName reports what is wrong with a [Brand.Name], or nil.
func CheckName(name string) error {
	const rule = "printable characters, with spaces only between words"
	switch n := utf8.RuneCountInString(name); {
	case name == "":
		return errors.New("brand: the Name is empty: give the name customers know the service by, such as Acme")
	case n > MaxNameLength:
		return fmt.Errorf("brand: the Name is %d characters long; it may have at most %d", n, MaxNameLength)
	case !utf8.ValidString(name):
		return errors.New("brand: the Name is not valid UTF-8; it may hold " + rule)
	}
	for i, r := range name {
		if r != ' ' && !unicode.IsPrint(r) {
			return fmt.Errorf("brand: the Name holds %U, which is not printable; it may hold %s", r, rule)
		}
		if r == ' ' && (i == 0 || i == len(name)-1 || name[i-1] == ' ') {
			return fmt.Errorf("brand: the Name %q has a space at an end or two in a row; it may hold %s", name, rule)
		}
	}
	return nil
}

// CheckCommand reports what is wrong with a [Brand.Command], or nil.
func CheckCommand(command string) error {
	if !words(command, MaxCommandLength, 'a', 'z', '-') {
		return fmt.Errorf("brand: the Command %q is not allowed: it must be 1 to %d characters, lowercase letters a-z and digits "+
			"in words joined by single hyphens, starting with a letter, such as acme or acme-api", command, MaxCommandLength)
	}
	return nil
}

// CheckEnvPrefix reports what is wrong with a [Brand.EnvPrefix], or nil.
func CheckEnvPrefix(prefix string) error {
	if !words(prefix, MaxEnvPrefixLength, 'A', 'Z', '_') {
		return fmt.Errorf("brand: the EnvPrefix %q is not allowed: it must be 1 to %d characters, uppercase letters A-Z and digits "+
			"in words joined by single underscores, starting with a letter, such as ACME or ACME_API", prefix, MaxEnvPrefixLength)
	}
	return nil
}

// words reports whether s is at most max bytes of ASCII letters between lo and hi and
// digits, in words joined by single sep, starting with a letter.
func words(s string, max int, lo, hi, sep byte) bool {
	if s == "" || len(s) > max || s[0] < lo || s[0] > hi || s[len(s)-1] == sep {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= lo && c <= hi, c >= '0' && c <= '9':
		case c == sep && s[i-1] != sep:
		default:
			return false
		}
	}
	return true
}
