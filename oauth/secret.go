package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// Prefixes of the secrets the server issues. They tell a code from a token at a glance
// and let secret scanners recognise a leaked token.
const (
	codePrefix    = "tgac_"
	accessPrefix  = "tgat_"
	refreshPrefix = "tgrt_"
	clientPrefix  = "tgcl_"
)

// secretLen is the length of the random part of a secret: 32 bytes in base64url.
const secretLen = 43

// newSecret returns prefix followed by 256 random bits in base64url.
func newSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// secretShaped reports whether s is a secret with the given prefix, so that values of
// any other shape are refused before they reach the store.
func secretShaped(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && len(rest) == secretLen && isBase64URL(rest)
}

func isBase64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validChallenge reports whether s can be an S256 code challenge: the base64url of a
// SHA-256 digest, 43 characters.
func validChallenge(s string) bool { return len(s) == secretLen && isBase64URL(s) }

// validVerifier reports whether s is a PKCE code verifier (RFC 7636 section 4.1): 43 to
// 128 unreserved characters.
func validVerifier(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			return false
		}
	}
	return true
}

// verifierMatches reports whether the S256 transform of verifier is challenge.
func verifierMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}
