package auth_test

import (
	"crypto/sha256"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/auth"
)

// uuidShape is the reference for ParseKey: 8-4-4-4-12 hexadecimal digits, any case.
var uuidShape = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

const (
	lowerKey = "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"
	upperKey = "3F2A9C1E-7B4D-4E8A-9C0F-1A2B3C4D5E6F"
	mixedKey = "3f2A9c1E-7b4D-4e8A-9C0f-1a2B3c4D5e6F"
)

func TestParseKeyAccepts(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"lowercase", lowerKey, lowerKey},
		{"uppercase", upperKey, lowerKey},
		{"mixed case", mixedKey, lowerKey},
		{"all digits", "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"},
		{"all f", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "ffffffff-ffff-ffff-ffff-ffffffffffff"},
		// The edge checks the shape only, not the version or variant bits.
		{"not version 4", "3f2a9c1e-7b4d-1e8a-0c0f-1a2b3c4d5e6f", "3f2a9c1e-7b4d-1e8a-0c0f-1a2b3c4d5e6f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := auth.ParseKey(tt.in)
			if !ok || got != tt.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q, true", tt.in, got, ok, tt.want)
			}
		})
	}
}

func TestParseKeyRefuses(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"undefined", "undefined"},
		{"null", "null"},
		{"placeholder", "YOUR_API_KEY"},
		{"placeholder in angle brackets", "<API_KEY>"},
		{"35 chars (truncated)", lowerKey[:35]},
		{"37 chars (extra digit)", lowerKey + "0"},
		{"37 chars (leading digit)", "0" + lowerKey},
		{"no hyphens (32 hex)", strings.ReplaceAll(lowerKey, "-", "")},
		{"no hyphens padded to 36", strings.ReplaceAll(lowerKey, "-", "") + "0000"},
		{"hyphen shifted left", "3f2a9c1-e7b4d-4e8a-9c0f-1a2b3c4d5e6f"},
		{"hyphen shifted right", "3f2a9c1e7-b4d-4e8a-9c0f-1a2b3c4d5e6f"},
		{"hyphens 8-4-4-16", "3f2a9c1e-7b4d-4e8a-9c0f1a2b-3c4d5e6f"},
		{"underscore separators", "3f2a9c1e_7b4d_4e8a_9c0f_1a2b3c4d5e6f"},
		{"space separators", "3f2a9c1e 7b4d 4e8a 9c0f 1a2b3c4d5e6f"},
		{"hyphen in hex position", "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e-f"},
		{"non-hex g", "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6g"},
		{"non-hex G", "3F2A9C1E-7B4D-4E8A-9C0F-1A2B3C4D5E6G"},
		{"non-hex z first", "zf2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"},
		{"leading space", " " + lowerKey[1:]},
		{"trailing space", lowerKey[:35] + " "},
		{"surrounding spaces", " " + lowerKey + " "},
		{"braces", "{" + lowerKey + "}"},
		{"urn", "urn:uuid:" + lowerKey},
		{"non-ASCII digit, 36 bytes", "３a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"},
		{"NUL byte", lowerKey[:35] + "\x00"},
		{"newline", lowerKey[:35] + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := auth.ParseKey(tt.in); ok || got != "" {
				t.Fatalf("ParseKey(%q) = %q, %v; want \"\", false", tt.in, got, ok)
			}
		})
	}
}

func TestHashKey(t *testing.T) {
	want := auth.Hash(sha256.Sum256([]byte(lowerKey)))
	for _, v := range []string{lowerKey, upperKey, mixedKey} {
		if got := auth.HashKey(v); got != want {
			t.Errorf("HashKey(%q) = %s; want sha256 of the lowercase text %s", v, got, want)
		}
	}
	if auth.HashKey(lowerKey) == auth.HashKey("4f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f") {
		t.Error("two different keys hash the same")
	}
	// String is the hexadecimal digest.
	if s := want.String(); len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
		t.Errorf("Hash.String() = %q; want 64 lowercase hex digits", s)
	}
	// A value of another length is hashed as it is.
	if got, want := auth.HashKey("short"), auth.Hash(sha256.Sum256([]byte("short"))); got != want {
		t.Errorf("HashKey(short) = %s; want %s", got, want)
	}
}

func TestNewKeyValue(t *testing.T) {
	seen := make(map[string]bool)
	for range 100 {
		v := auth.NewKeyValue()
		got, ok := auth.ParseKey(v)
		if !ok || got != v {
			t.Fatalf("NewKeyValue() = %q does not pass ParseKey unchanged (got %q, %v)", v, got, ok)
		}
		if v[14] != '4' {
			t.Fatalf("NewKeyValue() = %q is not version 4", v)
		}
		if !strings.ContainsRune("89ab", rune(v[19])) {
			t.Fatalf("NewKeyValue() = %q does not have the RFC 4122 variant", v)
		}
		if seen[v] {
			t.Fatalf("NewKeyValue() repeated %q", v)
		}
		seen[v] = true
	}
}

func TestKeyRevoked(t *testing.T) {
	var k auth.Key
	if k.Revoked() {
		t.Error("a key with a zero RevokedAt reports revoked")
	}
	k.RevokedAt = t0
	if !k.Revoked() {
		t.Error("a key with a RevokedAt does not report revoked")
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		lowerKey, upperKey, mixedKey, "", "undefined", "YOUR_API_KEY",
		lowerKey[:35], lowerKey + "0", "{" + lowerKey + "}", "urn:uuid:" + lowerKey,
		"3f2a9c1e_7b4d_4e8a_9c0f_1a2b3c4d5e6f", "３a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f",
		strings.Repeat("-", 36), strings.Repeat("a", 36),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := auth.ParseKey(s)
		if ok != uuidShape.MatchString(s) {
			t.Fatalf("ParseKey(%q) ok = %v; the UUID shape says %v", s, ok, !ok)
		}
		if !ok {
			if got != "" {
				t.Fatalf("ParseKey(%q) refused but returned %q", s, got)
			}
			return
		}
		if len(got) != 36 {
			t.Fatalf("ParseKey(%q) = %q, length %d", s, got, len(got))
		}
		for i := range len(got) {
			c := got[i]
			switch i {
			case 8, 13, 18, 23:
				if c != '-' {
					t.Fatalf("ParseKey(%q) = %q: no hyphen at %d", s, got, i)
				}
			default:
				if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
					t.Fatalf("ParseKey(%q) = %q: %q at %d is not lowercase hex", s, got, c, i)
				}
			}
		}
		if !strings.EqualFold(got, s) {
			t.Fatalf("ParseKey(%q) = %q is not the same key", s, got)
		}
		if auth.HashKey(s) != auth.HashKey(got) {
			t.Fatalf("HashKey differs between %q and its canonical form %q", s, got)
		}
	})
}
