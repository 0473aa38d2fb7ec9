// Package cleantext makes text fit to show: [Printable] tells whether text that a
// client chose to be shown to others (a key's name, an OAuth client's name) can be
// shown as it is, and [Message] makes the text of an error message fit to show a
// client.
//
// The front doors build their error messages from libraries' errors (graphql-go's
// validation, the MCP SDK's refusals) and from what the client sent, and either may
// carry what is not clean text: the marks package fmt writes for an argument it
// cannot format (graphql-go writes "%!q(<nil>)" for a type the schema does not have),
// control and invisible formatting characters, invalid UTF-8, or a long echo of the
// input.
// [Message] rewrites those; a clean message passes unchanged and unallocated.
package cleantext

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessage bounds a message, in bytes; a longer one is cut and ends with "...".
const MaxMessage = 1000

// fmtMark matches a mark of package fmt: a verb with a nil argument (%!q(<nil>)), an
// argument of the wrong type (%!d(string=x)), a missing one (%!v(MISSING)), an extra
// one (%!(EXTRA int=1)), or a bad verb (%!(NOVERB)). A nil argument follows "type " in
// graphql-go's messages, which the match takes with it.
var fmtMark = regexp.MustCompile(`(type )?%!([a-zA-Z]?)\(([^()]*)\)`)

// Message returns msg as clean text: fmt's marks rewritten (a nil argument as "an
// unknown type", which is what graphql-go's nil arguments stand for; an argument of
// the wrong type as its value; the other marks dropped, and no "%!" left), line breaks and tabs as
// spaces, other control and formatting characters and invalid UTF-8 as U+FFFD, and
// the whole cut to [MaxMessage] bytes.
func Message(msg string) string {
	if clean(msg) {
		return msg
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if strings.Contains(msg, "%!") {
		// What is left of a mark that fmtMark does not take (a value with
		// parentheses, say) loses its "!".
		msg = strings.ReplaceAll(fmtMark.ReplaceAllStringFunc(msg, rewriteMark), "%!", "% ")
	}
	msg = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return utf8.RuneError
		}
		return r
	}, msg)
	msg = strings.TrimSpace(msg)
	if len(msg) > MaxMessage {
		cut := MaxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// rewriteMark rewrites one mark of fmt (see [fmtMark]).
func rewriteMark(mark string) string {
	m := fmtMark.FindStringSubmatch(mark)
	prefix, verb, arg := m[1], m[2], m[3]
	switch {
	case arg == "<nil>":
		return "an unknown type"
	case verb != "" && arg != "MISSING":
		if _, value, ok := strings.Cut(arg, "="); ok {
			return prefix + value
		}
	}
	return strings.TrimSuffix(prefix, " ")
}

// clean reports whether msg needs no rewriting: short, valid UTF-8, without fmt's
// marks, control characters or formatting characters.
func clean(msg string) bool {
	if len(msg) > MaxMessage || strings.Contains(msg, "%!") {
		return false
	}
	for i := 0; i < len(msg); {
		c := msg[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(msg[i:])
		if r == utf8.RuneError && size == 1 || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
		i += size
	}
	return true
}

// MaxMarks is the most combining marks [Printable] allows on one character: enough for
// the languages that write several (Vietnamese, the Indic scripts), too few to draw
// across the lines around.
const MaxMarks = 4

// PrintableRule says what [Printable] text is, for the message that refuses other
// text: "<field> must be " followed by it.
const PrintableRule = "printable UTF-8 text, without control characters, invisible formatting characters such as bidirectional controls and zero-width characters, or more than 4 combining marks on a letter"

// Printable reports whether s is valid UTF-8 without control characters, formatting
// characters (Unicode category Cf: bidirectional controls, zero-width characters) or a
// stack of more than [MaxMarks] combining marks on one character, any of which would
// let text that a client chose reorder, hide or draw over the text of the page around
// it, or pass for other text ("primary" followed by a zero-width space).
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	marks := 0 // the combining marks on the current character
	for _, r := range s {
		switch {
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return false
		case unicode.In(r, unicode.Mn, unicode.Me):
			if marks++; marks > MaxMarks {
				return false
			}
		default:
			marks = 0
		}
	}
	return true
}
