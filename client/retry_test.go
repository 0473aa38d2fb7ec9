package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// answer is one scripted answer of a fake service.
type answer struct {
	status     int
	code       string // X-Error-Code
	retryAfter string
}

var (
	ok          = answer{status: 200}
	unavailable = answer{status: 503, code: "unavailable"}
	internal    = answer{status: 500, code: "internal"}
	limited     = answer{status: 429, code: "rate_limited"}
	broke       = answer{status: 429, code: "credits_exhausted"}
	invalid     = answer{status: 400, code: "invalid_input"}
)

// scripted starts a service that gives the answers in order (the last one again when
// they run out) and counts the requests.
func scripted(t *testing.T, answers ...answer) (url string, requests func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := answers[min(n, len(answers)-1)]
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		if a.status == 200 {
			fmt.Fprint(w, `{"status":"ok","error":null,"data":{"hash":"h"}}`)
			return
		}
		w.Header().Set(client.HeaderErrorCode, a.code)
		w.WriteHeader(a.status)
		fmt.Fprintf(w, `{"status":"error","error":"scripted %d","data":null}`, a.status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestNoRetryByDefault checks that without a policy every answer is returned as it
// comes: one request.
func TestNoRetryByDefault(t *testing.T) {
	for _, a := range []answer{unavailable, limited} {
		url, requests := scripted(t, a, ok)
		c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: url, Catalog: apis.All()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Execute(t.Context(), "hash", map[string]any{"text": "a"}); err == nil {
			t.Errorf("%d: the call succeeded, so it was retried", a.status)
		}
		if n := requests(); n != 1 {
			t.Errorf("%d: %d requests, want 1", a.status, n)
		}
	}
}

// TestRetryPolicy checks which answers are retried, the waits (full jitter over an
// exponential bound, at least Retry-After) and when the policy gives up.
func TestRetryPolicy(t *testing.T) {
	const base = 100 * time.Millisecond
	tests := []struct {
		name     string
		policy   client.RetryPolicy
		answers  []answer
		wantOK   bool
		requests int
		waits    []time.Duration
		wantCode string // the code of the returned error
	}{
		{"5xx then ok", client.RetryPolicy{}, []answer{unavailable, internal, ok}, true, 3, []time.Duration{base / 2, base}, ""},
		{"429 then ok", client.RetryPolicy{}, []answer{limited, ok}, true, 2, []time.Duration{base / 2}, ""},
		{"Retry-After longer than the jitter", client.RetryPolicy{}, []answer{{429, "rate_limited", "3"}, ok}, true, 2, []time.Duration{3 * time.Second}, ""},
		{"Retry-After shorter than the jitter", client.RetryPolicy{BaseDelay: 8 * time.Second}, []answer{{503, "unavailable", "1"}, ok}, true, 2, []time.Duration{4 * time.Second}, ""},
		{"Retry-After beyond MaxDelay", client.RetryPolicy{MaxDelay: 2 * time.Second}, []answer{{429, "rate_limited", "30"}, ok}, false, 1, nil, "rate_limited"},
		{"exhausted attempts", client.RetryPolicy{MaxAttempts: 4}, []answer{unavailable}, false, 4, []time.Duration{base / 2, base, 2 * base}, "unavailable"},
		{"bound capped by MaxDelay", client.RetryPolicy{MaxAttempts: 4, MaxDelay: 150 * time.Millisecond}, []answer{unavailable}, false, 4, []time.Duration{base / 2, 75 * time.Millisecond, 75 * time.Millisecond}, "unavailable"},
		{"credits exhausted", client.RetryPolicy{}, []answer{broke, ok}, false, 1, nil, "credits_exhausted"},
		{"4xx", client.RetryPolicy{}, []answer{invalid, ok}, false, 1, nil, "invalid_input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, requests := scripted(t, tt.answers...)
			var waits []time.Duration
			p := tt.policy
			if p.BaseDelay == 0 {
				p.BaseDelay = base
			}
			p.Rand = func() float64 { return 0.5 }
			p.Sleep = func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				return nil
			}
			c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: url, Catalog: apis.All(), Retry: &p})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Execute(t.Context(), "hash", map[string]any{"text": "a"})
			if (err == nil) != tt.wantOK {
				t.Fatalf("error %v, want success %v", err, tt.wantOK)
			}
			var e *client.APIError
			if !tt.wantOK && (!errors.As(err, &e) || e.Code != tt.wantCode) {
				t.Errorf("error %v, want an APIError with code %s", err, tt.wantCode)
			}
			if n := requests(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if !slices.Equal(waits, tt.waits) {
				t.Errorf("waits %v, want %v", waits, tt.waits)
			}
		})
	}
}

// TestRetryStopsWithContext checks that a wait cut short by the context ends the call
// with both the context's error and the last answer.
func TestRetryStopsWithContext(t *testing.T) {
	url, requests := scripted(t, unavailable)
	ctx, cancel := context.WithCancel(t.Context())
	p := &client.RetryPolicy{Sleep: func(ctx context.Context, _ time.Duration) error {
		cancel()
		return ctx.Err()
	}}
	c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: url, Catalog: apis.All(), Retry: p})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Execute(ctx, "hash", map[string]any{"text": "a"})
	var e *client.APIError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || e.StatusCode != 503 {
		t.Errorf("error %v, want context.Canceled and the 503", err)
	}
	if n := requests(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestRetryLive retries a real 429 of the live server: the policy waits the
// Retry-After the server sends, and the next answer (still limited, as the test clock
// does not move) ends the attempts.
func TestRetryLive(t *testing.T) {
	srv := testserver.Start(t)
	var waits []time.Duration
	p := &client.RetryPolicy{MaxAttempts: 2, MaxDelay: time.Minute, Rand: func() float64 { return 0 },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	c := newClient(t, srv, testserver.RateLimitedKey, &client.Options{Retry: p})
	if _, err := c.Execute(t.Context(), "hash", map[string]any{"text": "a"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Execute(t.Context(), "hash", map[string]any{"text": "a"})
	var e *client.APIError
	if !errors.As(err, &e) || e.Code != "rate_limited" {
		t.Fatalf("error %v, want rate_limited", err)
	}
	if len(waits) != 1 || waits[0] != e.Rate.RetryAfter || waits[0] <= 0 {
		t.Errorf("waits %v, want one of Retry-After %v", waits, e.Rate.RetryAfter)
	}
	if n := srv.APICalls(); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}
