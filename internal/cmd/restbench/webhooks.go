package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The webhook servers run examples/server as the server does, with the admin API and
// a second account, "events", whose changes restbench makes while it drives the
// server: -events a second, through the admin API, taking turns: a credit grant
// (credits.granted) and the rotation of the account's sub-key (key.rotated). The
// calls driven are the bench account's, as the server's. server-events makes those
// changes with no endpoint registered; server-webhooks registers an endpoint of the
// account (every type) on a receiver of restbench's own, on loopback, which answers
// 204: each change is a message the server signs and posts while it serves the calls.

// benchAdminToken is the admin token of the webhook servers.
const benchAdminToken = "restbench-admin-token-0123456789"

// The events account's keys: its primary key and the sub-key rotated.
var (
	eventsPrimary = benchKey(1)
	eventsSubKey  = benchKey(2)
)

// exampleArgs returns the flags and the fixtures of examples/server run as kind: the
// bench account on the bench plan, and for the webhook servers the events account, on
// a plan of its own.
func exampleArgs(kind string) (args []string, fixtures map[string]any) {
	plans := []map[string]any{{"name": benchPlan.Name, "credits": benchPlan.Credits, "rate_per_minute": benchPlan.RatePerMinute,
		"concurrency": benchPlan.Concurrency, "graphql_max_apis": benchPlan.GraphQLMaxAPIs}}
	accounts := []map[string]any{{"id": "bench", "plan": benchPlan.Name,
		"keys": []map[string]any{{"name": "primary", "value": benchKey(0), "primary": true}}}}
	if kind != "server" {
		plans = append(plans, map[string]any{"name": "events", "credits": 1000})
		accounts = append(accounts, map[string]any{"id": "events", "plan": "events",
			"keys": []map[string]any{{"name": "primary", "value": eventsPrimary, "primary": true},
				{"name": "rotated", "value": eventsSubKey}}})
		args = []string{"-admin-token", benchAdminToken, "-allow-private-fetch"}
	}
	return args, map[string]any{"plans": plans, "accounts": accounts}
}

// An eventLoad makes the changes of the events account while a server is driven, and,
// for server-webhooks, receives their messages.
type eventLoad struct {
	base   string
	rate   int
	keyID  string // the sub-key rotated
	client *http.Client
	// made counts the changes made, received the messages the receiver got (nil
	// without an endpoint).
	made     atomic.Int64
	received *atomic.Int64
	close    func()
}

// newEventLoad prepares the changes of the server at base, rate a second, and for
// server-webhooks starts the receiver and registers its endpoint.
func newEventLoad(kind, base string, rate int) (*eventLoad, error) {
	l := &eventLoad{base: base, rate: rate, client: &http.Client{Timeout: 10 * time.Second}, close: func() {}}
	var keys struct {
		Keys []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"keys"`
	}
	if err := l.admin(http.MethodGet, "/admin/v1/accounts/events/keys", "", &keys); err != nil {
		return nil, err
	}
	for _, k := range keys.Keys {
		if k.Name == "rotated" {
			l.keyID = k.ID
		}
	}
	if l.keyID == "" {
		return nil, fmt.Errorf("the events account has no key named rotated: %+v", keys)
	}
	if kind != "server-webhooks" {
		return l, nil
	}
	l.received = &atomic.Int64{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		l.received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	l.close = func() { srv.Close() }
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/account/webhooks",
		bytes.NewReader([]byte(`{"url":"http://`+ln.Addr().String()+`/hooks"}`)))
	req.Header.Set("X-Api-Key", eventsPrimary)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		l.close()
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		l.close()
		return nil, fmt.Errorf("register a webhook endpoint: %s %s", resp.Status, body)
	}
	return l, nil
}

// admin sends an admin API request and decodes its data into out, if not nil.
func (l *eventLoad) admin(method, path, body string, out any) error {
	req, err := http.NewRequest(method, l.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, &struct {
		Data any `json:"data"`
	}{out})
}

// start makes the changes, rate a second, until the function it returns is called,
// which returns the first error, if any.
func (l *eventLoad) start() (stop func() error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(l.rate))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var err error
			if l.made.Load()%2 == 0 {
				err = l.admin(http.MethodPost, "/admin/v1/accounts/events/credits", `{"amount": 1, "reason": "restbench"}`, nil)
			} else {
				err = l.admin(http.MethodPost, "/admin/v1/keys/"+l.keyID+"/rotate", "", nil)
			}
			if err != nil {
				firstErr = err
				return
			}
			l.made.Add(1)
		}
	})
	return func() error {
		close(done)
		wg.Wait()
		return firstErr
	}
}

// describe says what the load did so far.
func (l *eventLoad) describe() string {
	if l.received == nil {
		return fmt.Sprintf("%d changes made so far, no endpoint", l.made.Load())
	}
	return fmt.Sprintf("%d changes made so far, %d messages received", l.made.Load(), l.received.Load())
}
