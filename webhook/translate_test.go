package webhook_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/webhook"
)

func TestTranslate(t *testing.T) {
	actor := event.Actor{ID: "operator", Addr: netip.MustParseAddr("203.0.113.7")}
	restricted := json.RawMessage(`{"apis":["hash"],"expires_at":"2026-09-01T00:00:00Z"}`)
	renewal := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		change event.Change
		typ    string // "": no message
		data   string // the data's members past id, account and actor
	}{
		{"account created", event.Change{Type: event.AccountCreated, Key: "key_primary", Plan: "pro", Credits: 100, After: restricted},
			webhook.KeyCreated, `"key":"key_primary","primary":true,"expires_at":"2026-09-01T00:00:00Z"`},
		{"key created", event.Change{Type: event.KeyCreated, Key: "key_ci", Name: "ci"},
			webhook.KeyCreated, `"key":"key_ci","name":"ci","primary":false`},
		{"key renamed", event.Change{Type: event.KeyUpdated, Key: "key_ci", OldName: "ci", Name: "deploys", Before: restricted, After: restricted},
			webhook.KeyUpdated, `"key":"key_ci","name":"deploys","previous_name":"ci","changed":["name"],"expires_at":"2026-09-01T00:00:00Z"`},
		{"key restricted", event.Change{Type: event.KeyUpdated, Key: "key_ci", OldName: "ci", Name: "ci", After: restricted},
			webhook.KeyUpdated, `"key":"key_ci","name":"ci","changed":["restrictions"],"expires_at":"2026-09-01T00:00:00Z"`},
		{"key unrestricted and renamed", event.Change{Type: event.KeyUpdated, Key: "key_ci", OldName: "ci", Before: restricted},
			webhook.KeyUpdated, `"key":"key_ci","previous_name":"ci","changed":["name","restrictions"]`},
		{"key updated to the same", event.Change{Type: event.KeyUpdated, Key: "key_ci", OldName: "ci", Name: "ci"},
			webhook.KeyUpdated, `"key":"key_ci","name":"ci","changed":[]`},
		{"key rotated", event.Change{Type: event.KeyRotated, Key: "key_ci"}, webhook.KeyRotated, `"key":"key_ci"`},
		{"key revoked", event.Change{Type: event.KeyRevoked, Key: "key_ci"}, webhook.KeyRevoked, `"key":"key_ci"`},
		{"credits granted", event.Change{Type: event.CreditsAdjusted, Credits: 5000, Reason: "order 1042"},
			webhook.CreditsGranted, `"credits":5000,"reason":"order 1042"`},
		{"credits granted until", event.Change{Type: event.CreditsAdjusted, Credits: 1, Reason: "trial",
			Expires: time.Date(2026, 3, 31, 14, 0, 0, 0, time.FixedZone("CEST", 2*3600))},
			webhook.CreditsGranted, `"credits":1,"reason":"trial","expires_at":"2026-03-31T12:00:00Z"`},
		{"credits taken", event.Change{Type: event.CreditsAdjusted, Credits: -5, Reason: "refund"}, "", ""},
		{"no credits", event.Change{Type: event.CreditsAdjusted, Reason: "nothing"}, "", ""},
		{"plan changed now", event.Change{Type: event.PlanChanged, OldPlan: "free", Plan: "pro", Effective: t0},
			webhook.PlanChanged, `"plan":"pro","previous_plan":"free","effective_at":"2026-03-01T12:00:00Z","scheduled":false`},
		{"plan changed at the renewal", event.Change{Type: event.PlanChanged, OldPlan: "pro", Plan: "free", Effective: renewal},
			webhook.PlanChanged, `"plan":"free","previous_plan":"pro","effective_at":"2026-04-01T00:00:00Z","scheduled":true`},
		{"pending plan change canceled", event.Change{Type: event.PlanChanged, OldPlan: "pro", Plan: "pro", Effective: t0,
			Reason: "the change to free at 2026-04-01T00:00:00Z is canceled"},
			webhook.PlanChanged, `"plan":"pro","previous_plan":"pro","effective_at":"2026-03-01T12:00:00Z","scheduled":false,"reason":"the change to free at 2026-04-01T00:00:00Z is canceled"`},
		{"account suspended", event.Change{Type: event.AccountSuspended, Reason: "payment overdue"}, webhook.AccountSuspended, `"reason":"payment overdue"`},
		{"account reactivated", event.Change{Type: event.AccountReactivated}, webhook.AccountReactivated, ``},
		{"account closed", event.Change{Type: event.AccountClosed, Reason: "asked"}, webhook.AccountClosed, `"reason":"asked"`},
		{"account deleted", event.Change{Type: event.AccountDeleted}, "", ""},
		{"session started", event.Change{Type: event.SessionStarted, Session: "s_1", Key: "key_ci", Reason: "login"}, "", ""},
		{"session ended", event.Change{Type: event.SessionEnded, Session: "s_1"}, "", ""},
		{"endpoint disabled", event.Change{Type: event.EndpointDisabled, Endpoint: "ep_1", URL: "https://example.com/hooks", Reason: "the deliveries failed for 3 days"},
			webhook.EndpointDisabled, `"endpoint":"ep_1","url":"https://example.com/hooks","reason":"the deliveries failed for 3 days"`},
		{"endpoint created", event.Change{Type: event.EndpointCreated, Endpoint: "ep_1", URL: "https://example.com/hooks"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.change
			c.ID, c.At, c.Actor, c.Account = "C7XJ4QH2ZK5M3N6P8R2T4V6W8Y", t0, actor, "acme"
			m, ok := webhook.Translate(&c)
			if tc.typ == "" {
				if ok {
					t.Fatalf("Translate = %+v, want no message", m)
				}
				return
			}
			if !ok {
				t.Fatal("Translate gave no message")
			}
			id := webhook.DerivedID(tc.typ, "acme", c.ID)
			if m.ID != id || m.Type != tc.typ || m.Account != "acme" || !m.At.Equal(t0) || !m.Keep.Equal(t0.Add(webhook.ReplayWindow)) {
				t.Errorf("Translate = %+v", m)
			}
			sep := ","
			if tc.data == "" {
				sep = ""
			}
			want := `{"type":"` + tc.typ + `","timestamp":"2026-03-01T12:00:00Z","data":{"id":"` + id + `","account":"acme","actor":"operator"` + sep + tc.data + `}}`
			if !jsonEqual(t, m.Body, []byte(want)) {
				t.Errorf("body\n got %s\nwant %s", m.Body, want)
			}
			if strings.Contains(string(m.Body), "203.0.113.7") {
				t.Errorf("the body %s holds the address of the change", m.Body)
			}
		})
	}
}

func TestTranslateIDs(t *testing.T) {
	c := event.Change{Type: event.CreditsAdjusted, ID: "credits-0a1b", At: t0, Account: "acme", Credits: 10, Reason: "r"}
	first, _ := webhook.Translate(&c)
	replay := c
	replay.At = t0.Add(time.Hour)
	again, _ := webhook.Translate(&replay)
	if first.ID != again.ID {
		t.Errorf("a change published again with its ID has the message id %s, then %s", first.ID, again.ID)
	}
	other := c
	other.ID = "credits-0a1c"
	if m, _ := webhook.Translate(&other); m.ID == first.ID {
		t.Errorf("two changes have the message id %s", m.ID)
	}
	anonymous := c
	anonymous.ID = ""
	a, _ := webhook.Translate(&anonymous)
	b, _ := webhook.Translate(&anonymous)
	if !webhook.IsID(a.ID) || !webhook.IsID(b.ID) || a.ID == b.ID {
		t.Errorf("changes with no ID have the message ids %q and %q, want two random ones", a.ID, b.ID)
	}
}

func TestTranslateOthers(t *testing.T) {
	for _, e := range []event.Event{
		&event.Call{At: t0, Account: "acme", Key: "key_ci", Charged: 1},
		&event.Refusal{At: t0, Account: "acme", Key: "key_ci", Code: "rate_limited"},
		&event.Sweep{At: t0, Voided: 3},
	} {
		if m, ok := webhook.Translate(e); ok {
			t.Errorf("Translate(%s) = %+v, want no message", e.Kind(), m)
		}
	}
	// Every kind of change is either translated or left out on purpose.
	for _, k := range event.Kinds() {
		c := event.Change{Type: k, ID: "x", At: t0, Account: "acme", Credits: 1}
		_, ok := webhook.Translate(&c)
		switch k {
		case event.CallFinished, event.CallRefused, event.ReservationsVoided,
			event.SessionStarted, event.SessionEnded, event.AccountDeleted,
			event.EndpointCreated, event.EndpointUpdated, event.EndpointRotated, event.EndpointEnabled, event.EndpointDeleted:
			if ok {
				t.Errorf("a change of kind %s has a message", k)
			}
		default:
			if !ok {
				t.Errorf("a change of kind %s has no message: translate it, or list it here as left out", k)
			}
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}
