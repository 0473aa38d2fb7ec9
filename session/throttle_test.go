package session_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/session"
)

// TestFailedSignInsThrottled checks the throttle of failed sign-ins: after Burst
// failures from one address, its sign-ins are refused with 429 and Retry-After before
// anything is checked (the right key included) until a failure's worth of time has
// passed; a key tried from many addresses is throttled the same way; the address's
// sign-ins through the host's Login too; a successful sign-in takes nothing; every
// failure is logged at INFO, the throttle at WARN, never the key.
func TestFailedSignInsThrottled(t *testing.T) {
	now := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	opts := sessionOptions(t)
	opts.Now = clock
	mgr, key := newManager(t, opts)
	logs := &testenv.Logs{}
	login := session.LoginFunc(func(ctx context.Context, r *http.Request) (string, error) {
		if r.FormValue("password") == "right" {
			return "acct", nil
		}
		return "", fmt.Errorf("%w: the password is wrong", session.ErrLoginRefused)
	})
	h, err := session.NewHandler(mgr, &session.Options{Login: login, Logger: logs.Logger(),
		FailedSignIns: session.FailedSignIns{Burst: 3, Every: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "00000000-0000-4000-8000-000000000000"
	post := func(addr, body string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/account/session", strings.NewReader(body))
		r.RemoteAddr = addr + ":1234"
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	withKey := func(k string) string { return `{"api_key":"` + k + `","kind":"token"}` }

	// A good sign-in takes nothing; three failures from an address spend its burst.
	if w := post("192.0.2.1", withKey(key)); w.Code != http.StatusCreated {
		t.Fatalf("a good sign-in: %d %s", w.Code, w.Body)
	}
	for i, body := range []string{withKey(wrong), withKey("not a key"), `{"kind":"token"}`} {
		if w := post("192.0.2.1", body); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	w := post("192.0.2.1", withKey(key))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("X-Error-Code") != "rate_limited" || w.Header().Get("Retry-After") != "60" {
		t.Fatalf("the right key after three failures: %d %v %s; want 429 with Retry-After 60", w.Code, w.Header(), w.Body)
	}
	// The header's key and the host's Login are held alike.
	if w := post("192.0.2.1", `{"kind":"token"}`, "X-Api-Key", key); w.Code != http.StatusTooManyRequests {
		t.Errorf("the key in a header: %d, want 429", w.Code)
	}
	// Another address is not held.
	if w := post("192.0.2.2", withKey(key)); w.Code != http.StatusCreated {
		t.Errorf("another address: %d %s", w.Code, w.Body)
	}
	// A minute gives one more try.
	advance(time.Minute)
	if w := post("192.0.2.1", withKey(key)); w.Code != http.StatusCreated {
		t.Errorf("after a minute: %d %s", w.Code, w.Body)
	}

	// One key tried from many addresses is held too.
	const revoked = "11111111-1111-4111-8111-111111111111"
	for i := range 3 {
		post(fmt.Sprintf("198.51.100.%d", i), withKey(revoked))
	}
	if w := post("198.51.100.200", withKey(revoked)); w.Code != http.StatusTooManyRequests {
		t.Errorf("a key tried from a fourth address: %d, want 429", w.Code)
	}
	// IPv6 addresses are counted by their /64.
	for i := range 3 {
		post(fmt.Sprintf("[2001:db8::%d]", i+1), withKey(wrong))
	}
	if w := post("[2001:db8::ffff]", withKey(key)); w.Code != http.StatusTooManyRequests {
		t.Errorf("an address of the same /64: %d, want 429", w.Code)
	}

	// The host's Login: its refusals count against the address.
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/v1/account/session", strings.NewReader("password=guess"))
		r.RemoteAddr = "203.0.113.9:1"
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if _, err := h.SignInWithLogin(httptest.NewRecorder(), r); tollgate.CodeOf(err) != tollgate.CodeUnauthorized {
			t.Fatalf("a wrong password: %v", err)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/account/session", strings.NewReader("password=right"))
	r.RemoteAddr = "203.0.113.9:1"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var e *tollgate.Error
	if _, err := h.SignInWithLogin(httptest.NewRecorder(), r); !errors.As(err, &e) || e.Code != tollgate.CodeRateLimited || e.RetryAfter <= 0 {
		t.Errorf("the right password after three wrong ones: %v, want rate_limited with a RetryAfter", err)
	}

	failed, throttled := 0, map[string]bool{}
	for _, r := range logs.Records(t) {
		switch {
		case r.Level == "INFO" && r.Msg == "session: a sign-in failed":
			failed++
		case r.Level == "WARN" && r.Msg == "session: failed sign-ins are throttled":
			throttled[fmt.Sprint(r.Attrs["address"], " ", r.Attrs["with"])] = true
		}
	}
	if failed < 12 {
		t.Errorf("%d failed sign-ins logged, want every one", failed)
	}
	if !throttled["192.0.2.1 login"] || !throttled["198.51.100.2 key"] || !throttled["203.0.113.9 login"] {
		t.Errorf("the throttles logged: %v", throttled)
	}
	out := logs.String()
	for _, secret := range []string{key, wrong, revoked, "guess"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

// TestFailedSignInsOff checks that a negative Burst turns the throttle off.
func TestFailedSignInsOff(t *testing.T) {
	mgr, key := newManager(t, sessionOptions(t))
	h, err := session.NewHandler(mgr, &session.Options{Logger: (&testenv.Logs{}).Logger(), FailedSignIns: session.FailedSignIns{Burst: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		body := `{"api_key":"00000000-0000-4000-8000-000000000000"}`
		if i == 29 {
			body = `{"api_key":"` + key + `","kind":"token"}`
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/account/session", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if want := map[bool]int{false: 401, true: 201}[i == 29]; w.Code != want {
			t.Fatalf("sign-in %d: %d, want %d", i+1, w.Code, want)
		}
	}
}
