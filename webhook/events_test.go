package webhook_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/webhook"
)

var update = flag.Bool("update", false, "rewrite the golden bodies in testdata")

// t0 is the time of the sample events.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// samples returns one data of each event type, with every member set that may be,
// each with the message id DerivedID(type, "example").
func samples() []webhook.Data {
	c := func(typ, account, actor string) webhook.Common {
		return webhook.Common{ID: webhook.DerivedID(typ, "example"), Account: account, Actor: actor}
	}
	periodEnd := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	return []webhook.Data{
		webhook.KeyCreatedData{Common: c(webhook.KeyCreated, "acme", "key_primary"), Key: "key_ci", Name: "ci",
			ExpiresAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)},
		webhook.KeyUpdatedData{Common: c(webhook.KeyUpdated, "acme", "key_primary"), Key: "key_ci", Name: "deploys",
			PreviousName: "ci", Changed: []string{"name", "restrictions"}, ExpiresAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)},
		webhook.KeyRotatedData{Common: c(webhook.KeyRotated, "acme", "operator"), Key: "key_ci"},
		webhook.KeyRevokedData{Common: c(webhook.KeyRevoked, "acme", "session:s_7q2x"), Key: "key_ci"},
		webhook.KeyExpiredData{Common: c(webhook.KeyExpired, "acme", ""), Key: "key_ci", Name: "deploys",
			ExpiredAt: t0}, // the timestamp of key.expired is the expiry
		webhook.CreditsGrantedData{Common: c(webhook.CreditsGranted, "acme", "operator:alice"), Credits: 5000,
			Reason: "order 1042", ExpiresAt: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)},
		webhook.CreditsLowData{Common: c(webhook.CreditsLow, "acme", ""), Threshold: 80, Allowance: 10000, Used: 8000,
			Remaining: 2500, PeriodEnd: periodEnd},
		webhook.CreditsExhaustedData{Common: c(webhook.CreditsExhausted, "acme", ""), Remaining: 0, PeriodEnd: periodEnd},
		// The timestamp of period.renewed is the renewal: the period's start.
		webhook.PeriodRenewedData{Common: c(webhook.PeriodRenewed, "acme", ""), Plan: "pro", Allowance: 10000, Remaining: 10500,
			PeriodStart: t0, PeriodEnd: time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)},
		webhook.PlanChangedData{Common: c(webhook.PlanChanged, "acme", "operator"), Plan: "free", PreviousPlan: "pro",
			EffectiveAt: periodEnd, Scheduled: true},
		webhook.RateLimitExceededData{Common: c(webhook.RateLimitExceeded, "acme", ""), Key: "key_ci", Plan: "free", RatePerMinute: 60},
		webhook.AccountSuspendedData{Common: c(webhook.AccountSuspended, "acme", "operator"), Reason: "payment overdue"},
		webhook.AccountReactivatedData{Common: c(webhook.AccountReactivated, "acme", "operator"), Reason: "paid"},
		webhook.AccountClosedData{Common: c(webhook.AccountClosed, "acme", "operator"), Reason: "asked by the customer"},
		webhook.EndpointDisabledData{Common: c(webhook.EndpointDisabled, "acme", "service"), Endpoint: "ep_5k3jq2vt7n4d6sxw2ba3yfmh7q",
			URL: "https://hooks.example.com/tollgate", Reason: "every attempt failed for 3 days", Cause: "failing"},
	}
}

// TestGolden pins the body of each event type: testdata/<type>.json holds it, byte
// for byte (go test -update rewrites them).
func TestGolden(t *testing.T) {
	var typed []string
	for _, d := range samples() {
		typed = append(typed, d.Type())
		t.Run(d.Type(), func(t *testing.T) {
			m, err := webhook.NewMessage(t0, d, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Type != d.Type() || m.ID != webhook.DerivedID(d.Type(), "example") || m.Account != "acme" || !m.At.Equal(t0) {
				t.Errorf("NewMessage = %+v", m)
			}
			path := filepath.Join("testdata", d.Type()+".json")
			if *update {
				if err := os.WriteFile(path, append(m.Body, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if got := string(m.Body) + "\n"; got != string(want) {
				t.Errorf("the body of %s changed:\n got %s\nwant %s(a change of the wire format: if it is meant, go test -update, and update docs/webhooks.md)", d.Type(), got, want)
			}
		})
	}
	if !slices.Equal(typed, webhook.Types()) {
		t.Errorf("the samples are of %v, want one of each of Types(), in order: %v", typed, webhook.Types())
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, f := range files {
		if typ := strings.TrimSuffix(filepath.Base(f), ".json"); !slices.Contains(webhook.Types(), typ) {
			t.Errorf("%s is the golden body of no event type", f)
		}
	}
}

// TestTypes checks the names: unique, and of the scheme's form (dot-separated words of
// [a-z0-9_]).
func TestTypes(t *testing.T) {
	seen := map[string]bool{}
	for _, typ := range webhook.Types() {
		if seen[typ] {
			t.Errorf("%s is listed twice", typ)
		}
		seen[typ] = true
		parts := strings.Split(typ, ".")
		for _, p := range parts {
			if p == "" || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Errorf("%s is not dot-separated words of [a-z0-9_]", typ)
			}
		}
		if len(parts) != 2 {
			t.Errorf("%s is not a noun and a verb", typ)
		}
	}
	if len(seen) != 15 {
		t.Errorf("Types() has %d types, want 15", len(seen))
	}
}

// TestBodyBound fills every string of each type's data with the longest text that
// costs the most bytes in JSON, and checks that the strings are cut to their bounds and
// that the body stays under MaxBody.
func TestBodyBound(t *testing.T) {
	worst := strings.Repeat(`"\`, 10000) + "\u2028\x00\xff"
	for _, d := range samples() {
		t.Run(d.Type(), func(t *testing.T) {
			v := reflect.New(reflect.TypeOf(d)).Elem()
			v.Set(reflect.ValueOf(d))
			var fill func(v reflect.Value)
			fill = func(v reflect.Value) {
				for i := range v.NumField() {
					f := v.Field(i)
					switch {
					case f.Kind() == reflect.Struct && f.Type() == reflect.TypeOf(webhook.Common{}):
						fill(f)
					case f.Kind() == reflect.String && v.Type().Field(i).Name != "ID":
						f.SetString(worst)
					case f.Kind() == reflect.Slice:
						f.Set(reflect.ValueOf(slices.Repeat([]string{worst, "name", "restrictions", "name"}, 100)))
					}
				}
			}
			fill(v)
			m, err := webhook.NewMessage(t0, v.Interface().(webhook.Data), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Body) > webhook.MaxBody/2 {
				t.Errorf("the body is %d bytes, want at most half of MaxBody (%d)", len(m.Body), webhook.MaxBody)
			}
			var data map[string]any
			var body struct{ Data json.RawMessage }
			if err := json.Unmarshal(m.Body, &body); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(body.Data, &data); err != nil {
				t.Fatal(err)
			}
			for name, value := range data {
				s, ok := value.(string)
				if !ok {
					if list, ok := value.([]any); ok && name == "changed" && !reflect.DeepEqual(list, []any{"name", "restrictions"}) {
						t.Errorf("changed = %v, want [name restrictions]", list)
					}
					continue
				}
				bound := map[string]int{"url": webhook.MaxURLField, "reason": webhook.MaxReasonField,
					"name": webhook.MaxNameField, "previous_name": webhook.MaxNameField}[name]
				if bound == 0 {
					bound = webhook.MaxIDField
				}
				if len(s) > bound || !utf8.ValidString(s) || strings.ContainsAny(s, "\x00") {
					t.Errorf("%s is %d bytes (at most %d), or not valid text: %q", name, len(s), bound, s)
				}
			}
		})
	}
}

// TestClip checks the bounds of each kind of string through the data that carries it.
func TestClip(t *testing.T) {
	id := webhook.DerivedID("test", "clip")
	for _, tc := range []struct {
		name   string
		reason string
		want   string
	}{
		{"short", "payment overdue", "payment overdue"},
		{"at the bound", strings.Repeat("a", webhook.MaxReasonField), strings.Repeat("a", webhook.MaxReasonField)},
		{"over the bound", strings.Repeat("a", webhook.MaxReasonField+1), strings.Repeat("a", webhook.MaxReasonField-3) + "…"},
		{"cut at a character", strings.Repeat("é", 300), strings.Repeat("é", 254) + "…"},
		{"control characters", "line one\nline two\ttab\x00", "line one line two tab "},
		{"invalid UTF-8", "caf\xe9", "caf\uFFFD"},
		{"HTML", "<b>&</b>", "<b>&</b>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := webhook.NewMessage(t0, webhook.AccountSuspendedData{Common: webhook.Common{ID: id}, Reason: tc.reason}, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Data struct{ Reason string }
			}
			if err := json.Unmarshal(m.Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.Data.Reason != tc.want {
				t.Errorf("reason = %q, want %q", body.Data.Reason, tc.want)
			}
			if tc.name == "HTML" && !bytes.Contains(m.Body, []byte("<b>&</b>")) {
				t.Errorf("the body %s escapes HTML", m.Body)
			}
		})
	}
}

func TestNewMessageRefusesBadID(t *testing.T) {
	for _, id := range []string{"", "msg_", "key_1", "msg_2C4H2H6RBOQZU7FT3VXTQAKR4E", "msg_2c4h2h6rboqzu7ft3vxtqakr4f"} {
		if m, err := webhook.NewMessage(t0, webhook.KeyRotatedData{Common: webhook.Common{ID: id}, Key: "k"}, time.Time{}); err == nil {
			t.Errorf("NewMessage with the id %q = %+v, want an error", id, m)
		}
	}
}

func TestIDs(t *testing.T) {
	a, b := webhook.NewID(), webhook.NewID()
	if a == b || !webhook.IsID(a) || !webhook.IsID(b) || len(a) != len("msg_")+26 {
		t.Errorf("NewID = %q, then %q", a, b)
	}
	derived := webhook.DerivedID(webhook.CreditsLow, "acme", "2026-03-01T00:00:00Z", "80")
	if !webhook.IsID(derived) || derived != webhook.DerivedID(webhook.CreditsLow, "acme", "2026-03-01T00:00:00Z", "80") {
		t.Errorf("DerivedID = %q, not a stable message id", derived)
	}
	for _, other := range [][]string{
		{webhook.CreditsLow, "acme", "2026-03-01T00:00:00Z", "90"},
		{webhook.CreditsLow, "acme", "2026-04-01T00:00:00Z", "80"},
		{webhook.CreditsLow, "acmf", "2026-03-01T00:00:00Z", "80"},
		{webhook.CreditsExhausted, "acme", "2026-03-01T00:00:00Z", "80"},
		{webhook.CreditsLow, "acme2026-03-01T00:00:00Z", "", "80"},
		{webhook.CreditsLow, "acme", "2026-03-01T00:00:00Z80"},
	} {
		if webhook.DerivedID(other[0], other[1:]...) == derived {
			t.Errorf("DerivedID%q is the id of another cause", other)
		}
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"msg_2c4h2h6rboqzu7ft3vxtqakr4e", true},
		{"msg_2c4h2h6rboqzu7ft3vxtqakr4f", false}, // bits past the 128th
		{"msg_2c4h2h6rboqzu7ft3vxtqakr4", false},
		{"msg_2c4h2h6rboqzu7ft3vxtqakr4ea", false},
		{"msg_2C4H2H6RBOQZU7FT3VXTQAKR4E", false},
		{"msg_2c4h2h6rboqzu7ft3vxtqakr1e", false},
		{"ep_2c4h2h6rboqzu7ft3vxtqakr4e", false},
		{"", false},
	} {
		if got := webhook.IsID(tc.id); got != tc.want {
			t.Errorf("IsID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

// TestDocExamples checks that docs/webhooks.md shows each type's golden body as its
// example: the first JSON block after the type's heading.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range webhook.Types() {
		_, section, ok := strings.Cut(string(doc), "\n### `"+typ+"`\n")
		if !ok {
			t.Errorf("docs/webhooks.md has no heading ### `%s`", typ)
			continue
		}
		section, _, _ = strings.Cut(section, "\n### ")
		_, example, ok := strings.Cut(section, "```json\n")
		example, _, ok2 := strings.Cut(example, "```")
		if !ok || !ok2 {
			t.Errorf("docs/webhooks.md shows no example of %s", typ)
			continue
		}
		golden, err := os.ReadFile(filepath.Join("testdata", typ+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, []byte(example), golden) {
			t.Errorf("docs/webhooks.md's example of %s is not its golden body:\n%s\nwant %s", typ, example, golden)
		}
	}
}
