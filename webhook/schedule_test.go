package webhook

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDefaultSchedule(t *testing.T) {
	s := DefaultSchedule()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if s.Attempts() != 10 {
		t.Errorf("attempts = %d, want 10", s.Attempts())
	}
	if first, _ := s.Wait(1); first > 10*time.Second {
		t.Errorf("first retry after %s, want within seconds", first)
	}
	// "About three days": between two and a half and three and a half.
	if n := s.Length(); n < 60*time.Hour || n > 84*time.Hour {
		t.Errorf("length = %s, want about three days", n)
	}
	if want := 75*time.Hour + 35*time.Minute + 5*time.Second; s.Length() != want {
		t.Errorf("length = %s, want %s (the documented one)", s.Length(), want)
	}
	// Each call returns a copy of its own.
	s[0] = time.Hour
	if DefaultSchedule()[0] != 5*time.Second {
		t.Error("DefaultSchedule shares its slice")
	}
}

func TestScheduleWait(t *testing.T) {
	s := Schedule{time.Second, time.Minute}
	tests := []struct {
		attempts int
		want     time.Duration
		ok       bool
	}{
		{0, 0, false},
		{1, time.Second, true},
		{2, time.Minute, true},
		{3, 0, false},
		{11, 0, false},
	}
	for _, tt := range tests {
		got, ok := s.Wait(tt.attempts)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Wait(%d) = %s, %v; want %s, %v", tt.attempts, got, ok, tt.want, tt.ok)
		}
	}
	if s.Attempts() != 3 || s.String() != "[1s 1m0s]" {
		t.Errorf("Attempts %d, String %q", s.Attempts(), s)
	}
}

func TestScheduleCheck(t *testing.T) {
	long := make(Schedule, MaxScheduleSteps+1)
	for i := range long {
		long[i] = time.Second
	}
	tests := []struct {
		name string
		s    Schedule
		want string // in the error; "" for none
	}{
		{"empty", Schedule{}, ""},
		{"nil", nil, ""},
		{"default", DefaultSchedule(), ""},
		{"zero wait", Schedule{time.Second, 0}, "wait 2 is 0s"},
		{"negative wait", Schedule{-time.Second}, "wait 1 is -1s"},
		{"too many", long, "51 waits"},
		{"too long", Schedule{MaxScheduleLength, time.Second}, "over the limit"},
		{"longest", Schedule{MaxScheduleLength}, ""},
	}
	for _, tt := range tests {
		err := tt.s.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

func TestJittered(t *testing.T) {
	tests := []struct {
		wait   time.Duration
		jitter float64
		r      float64
		want   time.Duration
	}{
		{10 * time.Second, 0.2, 0.5, 10 * time.Second},
		{10 * time.Second, 0.2, 0, 8 * time.Second},
		{10 * time.Second, 0.2, 0.75, 11 * time.Second},
		{10 * time.Second, 0, 0, 10 * time.Second},
		{10 * time.Second, -1, 0, 10 * time.Second},
		{time.Microsecond, 0.9, 0, time.Millisecond}, // never below a millisecond
	}
	for _, tt := range tests {
		if got := jittered(tt.wait, tt.jitter, tt.r); got != tt.want {
			t.Errorf("jittered(%s, %v, %v) = %s, want %s", tt.wait, tt.jitter, tt.r, got, tt.want)
		}
	}
	// Within the bounds for every r in [0, 1).
	for r := 0.0; r < 1; r += 0.01 {
		got := jittered(time.Hour, DefaultJitter, r)
		if got < 48*time.Minute || got >= 72*time.Minute {
			t.Fatalf("jittered(1h, 0.2, %v) = %s, out of ±20%%", r, got)
		}
	}
}

func TestNextWait(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return at.Add(d).Format(http.TimeFormat) }
	const step = 5 * time.Minute
	tests := []struct {
		name   string
		status int
		ra     string
		want   time.Duration
	}{
		{"no header", 503, "", step},
		{"seconds, longer", 503, "3600", time.Hour},
		{"seconds, on 429", 429, "600", 10 * time.Minute},
		{"seconds, shorter than the step", 503, "10", step},
		{"zero", 429, "0", step},
		{"ignored on 500", 500, "3600", step},
		{"ignored on 200", 200, "3600", step},
		{"ignored on 301", 301, "3600", step},
		{"capped", 503, "999999999", 24 * time.Hour},
		{"huge", 503, "99999999999999999999999", step}, // not a number it reads
		{"negative", 503, "-60", step},
		{"fraction", 503, "1.5", step},
		{"garbage", 503, "soon", step},
		{"date, later", 503, date(2 * time.Hour), 2 * time.Hour},
		{"date, sooner", 503, date(time.Minute), step},
		{"date, passed", 503, date(-time.Hour), step},
		{"date, past the cap", 429, date(10 * 24 * time.Hour), 24 * time.Hour},
		{"spaces", 503, " 3600 ", time.Hour},
	}
	for _, tt := range tests {
		if got := nextWait(step, tt.status, tt.ra, at, DefaultMaxRetryAfter); got != tt.want {
			t.Errorf("%s: nextWait(%d, %q) = %s, want %s", tt.name, tt.status, tt.ra, got, tt.want)
		}
	}
	// A step longer than the cap is kept: Retry-After never shortens a wait.
	if got := nextWait(48*time.Hour, 503, "60", at, DefaultMaxRetryAfter); got != 48*time.Hour {
		t.Errorf("long step: %s", got)
	}
	// A negative cap ignores Retry-After.
	if got := nextWait(step, 503, "3600", at, -1); got != step {
		t.Errorf("negative cap: %s", got)
	}
}
