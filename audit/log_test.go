package audit

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/event"
)

// TestKinds checks that the log records every kind of change, each with an action of
// its own, and no other kind of event: a new kind of change fails it until it is
// recorded.
func TestKinds(t *testing.T) {
	l := &Log{}
	notChanges := []event.Kind{event.CallFinished, event.CallRefused, event.ReservationsVoided}
	actions := map[Action]event.Kind{}
	for _, k := range event.Kinds() {
		recorded := slices.Contains(l.Kinds(), k)
		if slices.Contains(notChanges, k) {
			if recorded {
				t.Errorf("the log subscribes to %s, which is no change", k)
			}
			continue
		}
		if !recorded {
			t.Errorf("the log does not record %s: add it to Log.Kinds and entryOf", k)
			continue
		}
		e, ok := entryOf(&event.Change{Type: k, ID: "c1", At: time.Unix(1, 0), Account: "acme", Actor: event.Actor{ID: "key_1"}})
		if !ok || e.Action == "" || e.Validate() != nil {
			t.Errorf("%s: the entry %+v (%v) is not one the store takes", k, e, ok)
			continue
		}
		if other, seen := actions[e.Action]; seen {
			t.Errorf("%s and %s are both recorded as %s", k, other, e.Action)
		}
		actions[e.Action] = k
	}
}

// TestEndpointEntries checks the entries of the changes of webhook endpoints: the
// endpoint as the target, its settings, the reason of a disabling; and none for the
// operator's endpoints, which are no account's.
func TestEndpointEntries(t *testing.T) {
	at := time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC)
	settings := json.RawMessage(`{"url":"https://example.com/in","events":[]}`)
	for _, tt := range []struct {
		change event.Change
		want   Entry
	}{
		{event.Change{Type: event.EndpointCreated, Endpoint: "ep_1", After: settings},
			Entry{Action: EndpointCreate, Target: "ep_1", After: settings}},
		{event.Change{Type: event.EndpointUpdated, Endpoint: "ep_1", Before: settings, After: settings},
			Entry{Action: EndpointUpdate, Target: "ep_1", Before: settings, After: settings}},
		{event.Change{Type: event.EndpointRotated, Endpoint: "ep_1", Effective: at.Add(24 * time.Hour)},
			Entry{Action: EndpointRotate, Target: "ep_1", After: json.RawMessage(`{"previous_secret_until":"2030-01-16T12:00:00Z"}`)}},
		{event.Change{Type: event.EndpointDisabled, Endpoint: "ep_1", Reason: "failing"},
			Entry{Action: EndpointDisable, Target: "ep_1", Reason: "failing"}},
		{event.Change{Type: event.EndpointEnabled, Endpoint: "ep_1"}, Entry{Action: EndpointEnable, Target: "ep_1"}},
		{event.Change{Type: event.EndpointDeleted, Endpoint: "ep_1", Before: settings},
			Entry{Action: EndpointDelete, Target: "ep_1", Before: settings}},
	} {
		c := tt.change
		c.ID, c.At, c.Account, c.Actor = "c1", at, "acme", event.Actor{ID: Service}
		e, ok := entryOf(&c)
		w := tt.want
		if !ok || e.Action != w.Action || e.Target != w.Target || string(e.Before) != string(w.Before) ||
			string(e.After) != string(w.After) || e.Reason != w.Reason || e.Actor != Service || e.Account != "acme" {
			t.Errorf("%s: %+v, want %+v", c.Type, e, w)
		}
		c.Account = ""
		if e, ok := entryOf(&c); ok {
			t.Errorf("%s of an operator's endpoint: %+v, want no entry", c.Type, e)
		}
	}
}
