package mcp

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestJSONStringLen checks the length the answer's budget counts for a text content
// against encoding/json's, on strings of every kind of character.
func TestJSONStringLen(t *testing.T) {
	alphabet := []string{"a", "\"", "\\", "\n", "\t", "\b", "\f", "\x00", "\x1f", "<", ">", "&", "é", "日", "\u2028", "\u2029", "\xff", "\xe6\x97", "😀"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		s := ""
		for range rng.IntN(20) {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		b, _ := json.Marshal(s)
		if got := jsonStringLen(s); got != int64(len(b)) {
			t.Fatalf("jsonStringLen(%q) = %d, encoding/json writes %d bytes: %s", s, got, len(b), b)
		}
	}
}

// TestUnbilledBucket checks the token bucket: the burst, the refill by the clock, the
// wait it reports, and that buckets that refilled are forgotten once the map grows.
func TestUnbilledBucket(t *testing.T) {
	u := newUnbilled(10, 60)
	now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	if _, ok := u.take("a", 10, now); !ok {
		t.Fatal("the burst was refused")
	}
	if wait, ok := u.take("a", 3, now); ok || wait != 3*time.Second {
		t.Fatalf("beyond the burst: %v %v; want refused, 3s", wait, ok)
	}
	if _, ok := u.take("a", 2, now.Add(2*time.Second)); !ok {
		t.Fatal("two tokens two seconds later were refused")
	}
	if _, ok := u.take("b", 10, now); !ok {
		t.Fatal("another user's burst was refused")
	}
	if _, ok := u.take("a", 11, now.Add(time.Hour)); ok {
		t.Fatal("more than the burst was taken")
	}
	// A new user past minSweep users sweeps: those whose buckets refilled are
	// forgotten.
	for i := range minSweep - 2 { // a and b are kept
		u.take(string(rune('c'+i)), 1, now)
	}
	later := now.Add(time.Minute)
	u.take("last", 1, later)
	if n := u.size(); n != 1 {
		t.Fatalf("%d buckets kept after a sweep; want 1, the newest", n)
	}
}

// TestCountElements checks the count of a batch's messages that refuses a batch too
// large before it is decoded: nested arrays, objects and strings with brackets and
// commas do not count, and the count stops past the limit.
func TestCountElements(t *testing.T) {
	tests := []struct {
		body  string
		limit int
		want  int
	}{
		{`[]`, 5, 0},
		{` [ ] `, 5, 0},
		{`[1]`, 5, 1},
		{`[{"a":[1,2,3],"b":{"c":","}},"x,]\"[",[[],[]]]`, 5, 3},
		{"[\n{\"id\":1} ,\t{\"id\":2}\r\n]", 5, 2},
		{`[1,2,3,4,5,6,7,8,9]`, 5, 6},
		{`[1,2,3,4,5]`, 5, 5},
	}
	for _, tt := range tests {
		if got := countElements([]byte(tt.body), tt.limit); got != tt.want {
			t.Errorf("countElements(%s, %d) = %d, want %d", tt.body, tt.limit, got, tt.want)
		}
	}
}
