package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/store"
)

// TestCut checks that an error is cut to at most n bytes at a character boundary.
func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"aé", 2, "a"},   // é is 2 bytes
		{"aéb", 3, "aé"}, // the cut falls after it
		{"€", 2, ""},     // 3 bytes
		{"ab€", 4, "ab"},
	} {
		if got := cut(c.s, c.n); got != c.want || !utf8.ValidString(got) {
			t.Errorf("cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestCursorRoundTrip checks that ParseQuery reads back every cursor Position makes,
// and refuses a cursor that names the same position in other words.
func TestCursorRoundTrip(t *testing.T) {
	for _, p := range []Position{
		{At: time.Unix(0, 0).UTC(), Message: "m"},
		{At: time.Date(2030, 1, 15, 12, 0, 0, 123456789, time.UTC), Message: "msg_0123456789abcdefghjkmnpqrs"},
		{At: maxTime, Message: strings.Repeat("é", MaxID/2)},
		{At: time.Unix(1, 0).UTC(), Message: "with.dots and spaces/+"},
	} {
		c := p.Cursor()
		limit, got, ok, err := ParseQuery(Query{Cursor: c})
		if err != nil || !ok || limit != DefaultLimit || !got.At.Equal(p.At) || got.Message != p.Message {
			t.Errorf("ParseQuery(%q) = %d, %+v, %v, %v; want %+v", c, limit, got, ok, err, p)
		}
	}
	if _, _, _, err := ParseQuery(Query{Cursor: "01.bQ"}); !errors.Is(err, ErrBadCursor) || !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ParseQuery of a cursor with a leading zero: %v, want ErrBadCursor wrapping store.ErrInvalid", err)
	}
}
