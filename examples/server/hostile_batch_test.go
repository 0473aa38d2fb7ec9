package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// An answer is what one request of the batch checks got.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// request makes a request with alpha's key and a JSON body (if any), and reads the
// answer; it reports an error rather than failing the test, so that a goroutine may
// call it.
func (h *hostile) request(ctx context.Context, method, path, body string, hdr ...string) answer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.s.srv.URL+path, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("X-Api-Key", keyAlpha)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.body, a.err = io.ReadAll(resp.Body)
	return a
}

// cost is the X-Credits-Cost of an answer (0 when it has none).
func (a answer) cost() int64 {
	n, _ := strconv.ParseInt(a.header.Get("X-Credits-Cost"), 10, 64)
	return n
}

// usedAndInUse reads alpha's credits used and concurrency slots in use from
// /v1/analytics.
func (h *hostile) usedAndInUse(ctx context.Context) (used int64, inUse int, err error) {
	a := h.request(ctx, http.MethodGet, "/v1/analytics", "")
	if a.err != nil {
		return 0, 0, a.err
	}
	var env struct {
		Data struct {
			Credits struct {
				Used int64 `json:"used"`
			} `json:"credits"`
			Concurrency struct {
				InUse int `json:"in_use"`
			} `json:"concurrency"`
		} `json:"data"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &env) != nil {
		return 0, 0, fmt.Errorf("analytics: %d %s", a.status, a.body)
	}
	return env.Data.Credits.Used, env.Data.Concurrency.InUse, nil
}

// TestHostileBatchRetriedAfterLease sends a batch with an Idempotency-Key whose run
// outlives its lease (the service's clock jumps past the lease and the reservation's
// expiry while its items run, as they would for an instance that stalled), then its
// retry: the retry takes the record over and runs the batch again as a run of its
// own, which holds a concurrency slot while its items run and is charged for every
// one of them (X-Credits-Cost, each item's credits); the first run, whose mark then
// fails, is answered 409 and charged nothing; a third try gets the retry's answer; and
// the balance is the start less the X-Credits-Cost answered (but by the replays, which
// repeat what the run they replay cost). (A machine so slow that
// the first run ends before the retry claims the record replays the first run's answer
// instead: the case is then tried again, with a new key.)
func TestHostileBatchRetriedAfterLease(t *testing.T) {
	clock := testenv.NewClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	s := startClocked(t, clock, "-fixtures", "testdata/hostile.json", "-admin-token", testAdminToken)
	h := newHostile(t, s)
	ctx := t.Context()
	start := h.balance("alpha")
	const items = 8 // one round of the default parallelism
	body := `{"items": [` + strings.TrimSuffix(strings.Repeat(`{"message": "m", "delay_ms": 3000},`, items), ",") + `]}`
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var spent int64
	for attempt := 1; ; attempt++ {
		key := fmt.Sprintf("outlived-%d", attempt)
		batch := func() answer {
			return h.request(ctx, http.MethodPost, "/v1/echo/batch", body, "Idempotency-Key", key)
		}
		used0, _, err := h.usedAndInUse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		firstc := make(chan answer, 1)
		go func() { firstc <- batch() }()
		if err := testenv.Wait(waitCtx, func() error {
			used, inUse, err := h.usedAndInUse(waitCtx)
			if err == nil && (used != used0+items || inUse != 1) {
				err = errors.New("the first run is not admitted yet")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute) // past the lease (60s) and the reservation's expiry

		retryc := make(chan answer, 1)
		go func() { retryc <- batch() }()
		var used int64
		var inUse int
		err = testenv.Wait(waitCtx, func() error {
			select {
			case a := <-retryc:
				retryc <- a
				return nil // it ended: what was seen while it ran is judged below
			default:
			}
			var err error
			if used, inUse, err = h.usedAndInUse(waitCtx); err == nil && (inUse == 0 || used == 0) {
				err = errors.New("the retry is not admitted yet")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		retry, first := <-retryc, <-firstc
		third := batch()
		for _, a := range []answer{first, retry, third} {
			if a.err != nil {
				t.Fatal(a.err)
			}
			if a.header.Get("Idempotent-Replayed") == "" { // a replay says what the run it replays cost
				spent += a.cost()
			}
		}
		if retry.header.Get("Idempotent-Replayed") == "true" && attempt < 3 {
			t.Logf("attempt %d: the first run ended before the retry claimed its record; again with a new key", attempt)
			continue
		}
		t.Logf("the first run: %d, X-Credits-Cost %s; the retry: %d, X-Credits-Cost %s; while it ran: %d credits used, %d slots in use",
			first.status, first.header.Get("X-Credits-Cost"), retry.status, retry.header.Get("X-Credits-Cost"), used, inUse)
		if first.status != http.StatusConflict || first.header.Get("X-Error-Code") != "conflict" || first.cost() != 0 {
			t.Errorf("the first run: %d %q, X-Credits-Cost %d: %s; want 409 conflict, charged nothing: a retry took over",
				first.status, first.header.Get("X-Error-Code"), first.cost(), first.body)
		}
		if retry.status != http.StatusOK || retry.header.Get("Idempotent-Replayed") != "" || retry.cost() != items {
			t.Errorf("the retry: %d, replayed %q, X-Credits-Cost %d; want 200, run again, charged %d", retry.status,
				retry.header.Get("Idempotent-Replayed"), retry.cost(), items)
		}
		var env struct {
			Data struct {
				Items []struct {
					Status  string `json:"status"`
					Credits int64  `json:"credits"`
				} `json:"items"`
			} `json:"data"`
		}
		if err := json.Unmarshal(retry.body, &env); err != nil || len(env.Data.Items) != items {
			t.Fatalf("the retry's answer: %.300s (%v), want %d items", retry.body, err, items)
		}
		for i, it := range env.Data.Items {
			if it.Status != "ok" || it.Credits != 1 {
				t.Errorf("the retry's item %d: %+v; want ok, charged 1 (and so every item)", i, it)
				break
			}
		}
		if inUse != 1 || used != used0+items {
			t.Errorf("while the retry ran: %d slots in use, %d credits used; want 1 and %d: it holds a slot and its items' credits",
				inUse, used, used0+items)
		}
		if third.status != http.StatusOK || third.header.Get("Idempotent-Replayed") != "true" || string(third.body) != string(retry.body) {
			t.Errorf("a third try: %d, replayed %q: %.300s; want the retry's answer replayed", third.status, third.header.Get("Idempotent-Replayed"), third.body)
		}
		break
	}
	if got := h.balance("alpha"); got != start-spent || spent == 0 {
		t.Errorf("balance %d; it started at %d and was answered X-Credits-Cost summing to %d, so want %d (and something charged)",
			got, start, spent, start-spent)
	}
}
