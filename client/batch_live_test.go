package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// TestBatchLive sends batches to the live service: results in order, an item the API
// rejects (charged), a batch sent again with its idempotency key (run and charged
// once), and the batches the service refuses whole.
func TestBatchLive(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv, testserver.PrimaryKey, nil)
	ctx := t.Context()
	balance := srv.Balance(t, "acme")

	var items []map[string]any
	for i := range 100 {
		items = append(items, map[string]any{"text": fmt.Sprint(i)})
	}
	resp, err := c.ExecuteBatch(ctx, "hash", items, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range resp.Items {
		var out struct{ Hash string }
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		if err := it.Decode(&out); err != nil || out.Hash != hex.EncodeToString(sum[:]) || it.Credits != 1 {
			t.Fatalf("item %d: %+v, %v", i, it, err)
		}
	}
	if resp.Summary != (client.BatchSummary{OK: 100, Credits: 100}) || resp.Credits.Cost != 100 || resp.Credits.Remaining != balance-100 || resp.Replayed {
		t.Errorf("summary %+v credits %+v", resp.Summary, resp.Credits)
	}

	mixed, err := c.ExecuteBatch(ctx, "date-info", []map[string]any{{"date": "2024-02-29"}, {"date": "2026-02-30"}}, nil)
	var ie *client.ItemError
	if err != nil || mixed.Items[0].Err != nil || !errors.As(mixed.Items[1].Err, &ie) || ie.Code != "rejected" || ie.Index != 1 ||
		!strings.Contains(ie.Message, "does not exist") || mixed.Summary != (client.BatchSummary{OK: 1, Failed: 1, Credits: 2}) {
		t.Errorf("date-info batch: %+v, %v", mixed, err)
	}

	key := &client.BatchOptions{IdempotencyKey: "job-1/chunk-1"}
	first, err := c.ExecuteBatch(ctx, "uuid-generator", []map[string]any{{"count": 3}}, key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.ExecuteBatch(ctx, "uuid-generator", []map[string]any{{"count": 3}}, key)
	if err != nil || !again.Replayed || first.Replayed || string(again.Items[0].Data) != string(first.Items[0].Data) {
		t.Errorf("sent again: %+v, %v; want the first answer replayed", again, err)
	}
	if _, err := c.ExecuteBatch(ctx, "uuid-generator", []map[string]any{{"count": 4}}, key); !isAPIError(err, 422, "") {
		t.Errorf("the key with other items: %v, want a 422", err)
	}
	if got, want := srv.Balance(t, "acme"), balance-100-2-1; got != want {
		t.Errorf("balance %d, want %d", got, want)
	}

	// Refused whole: more items than the plan allows, no credits, a key refused.
	if _, err := c.ExecuteBatch(ctx, "hash", append(items, map[string]any{"text": "one more"}), nil); !isAPIError(err, 400, "invalid_input") || !strings.Contains(err.Error(), "100") {
		t.Errorf("101 items: %v, want a 400 that says the limit", err)
	}
	broke := newClient(t, srv, testserver.NoCreditsKey, nil)
	if _, err := broke.ExecuteBatch(ctx, "hash", items[:2], nil); !isAPIError(err, 429, "credits_exhausted") {
		t.Errorf("no credits: %v", err)
	}
	restricted := newClient(t, srv, testserver.RestrictedKey, nil)
	if _, err := restricted.ExecuteBatch(ctx, "hash", items[:2], nil); !isAPIError(err, 403, "forbidden") {
		t.Errorf("restricted key: %v", err)
	}

	// The plan's batch size: pro's 100; trickle's 10, held to its burst of 1.
	for _, tt := range []struct {
		key  string
		want int
	}{{testserver.PrimaryKey, 100}, {testserver.RateLimitedKey, 1}} {
		if n, err := newClient(t, srv, tt.key, nil).BatchMaxItems(ctx); err != nil || n != tt.want {
			t.Errorf("BatchMaxItems: %d, %v; want %d", n, err, tt.want)
		}
	}
}

func isAPIError(err error, status int, code string) bool {
	var e *client.APIError
	return errors.As(err, &e) && e.StatusCode == status && (code == "" || e.Code == code)
}
