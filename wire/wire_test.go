package wire_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/wire"
)

func TestHeaderLists(t *testing.T) {
	want := []string{
		"X-Credits-Cost", "X-Credits-Remaining", "X-Credits-Granted", "X-Credits-Used",
		"X-Credits-Limit", "X-Credits-Renewal", "X-Plan", "X-RateLimit-Limit",
		"X-RateLimit-Remaining", "Retry-After",
	}
	if got := wire.CreditHeaders(); !slices.Equal(got, want) {
		t.Errorf("CreditHeaders = %q, want %q", got, want)
	}
	want = append([]string{"X-Error-Code", "Idempotent-Replayed"}, append(want, "RateLimit-Policy", "RateLimit", "X-Request-Id")...)
	if got := wire.ExposedHeaders(); !slices.Equal(got, want) {
		t.Errorf("ExposedHeaders = %q, want %q", got, want)
	}
	// Each call returns a list of its own: a caller may append to it.
	a := wire.CreditHeaders()
	a[0] = "changed"
	if wire.CreditHeaders()[0] != "X-Credits-Cost" {
		t.Error("CreditHeaders shares its list between calls")
	}
}

// TestEnvelopes: what the Append functions write decodes as the envelope types, and
// a message is escaped as a JSON string whatever it holds.
func TestEnvelopes(t *testing.T) {
	const msg = "parameter \"text\": is required\n<script>\u2028"
	tests := []struct {
		name string
		got  []byte
		want wire.BatchItem
	}{
		{"ok", wire.AppendOK(nil, []byte(`{"a":1}`)), wire.BatchItem{Envelope: wire.Envelope{Status: "ok", Data: json.RawMessage(`{"a":1}`)}}},
		{"error", wire.AppendError(nil, wire.CodeInvalidInput, msg), wire.BatchItem{Envelope: wire.Envelope{Status: "error", Error: msg, Data: json.RawMessage("null"), Code: "invalid_input"}}},
		{"ok item", wire.AppendBatchItem(nil, []byte(`[1]`), "", "", 2), wire.BatchItem{Envelope: wire.Envelope{Status: "ok", Data: json.RawMessage(`[1]`)}, Credits: 2}},
		{"error item", wire.AppendBatchItem(nil, nil, wire.CodeRejected, msg, 1), wire.BatchItem{Envelope: wire.Envelope{Status: "error", Error: msg, Data: json.RawMessage("null"), Code: "rejected"}, Credits: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got wire.BatchItem
			if err := json.Unmarshal(tt.got, &got); err != nil {
				t.Fatalf("%s does not decode: %v", tt.got, err)
			}
			if got.Status != tt.want.Status || got.Error != tt.want.Error || got.Code != tt.want.Code ||
				string(got.Data) != string(tt.want.Data) || got.Credits != tt.want.Credits {
				t.Errorf("%s decodes as %+v, want %+v", tt.got, got, tt.want)
			}
		})
	}
	if got := string(wire.AppendError(nil, "x", "m")); got != `{"status":"error","error":"m","data":null,"code":"x"}` {
		t.Errorf("AppendError writes %s", got)
	}
	if got := string(wire.AppendOK([]byte("pre:"), []byte("null"))); got != `pre:{"status":"ok","error":null,"data":null}` {
		t.Errorf("AppendOK writes %s", got)
	}
	var s wire.BatchSummary
	b := wire.AppendBatchSummary(nil, wire.BatchSummary{OK: 2, Failed: 1, Credits: 7})
	if err := json.Unmarshal(b, &s); err != nil || s != (wire.BatchSummary{OK: 2, Failed: 1, Credits: 7}) {
		t.Errorf("summary %s decodes as %+v, %v", b, s, err)
	}
}
