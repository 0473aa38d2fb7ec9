package webhook

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/tollgate-dev/tollgate/event"
)

// ReplayWindow is how long a store remembers the id of a message [Translate] made, at
// the least: a change published again with its ID within it (the replay of an
// idempotent credit adjustment) is not sent again.
const ReplayWindow = 7 * 24 * time.Hour

// Translate returns the message of an event of the service, and whether it has one:
//
//	event.AccountCreated      key.created, of the account's primary key ("primary": true)
//	event.KeyCreated          key.created
//	event.KeyUpdated          key.updated
//	event.KeyRotated          key.rotated
//	event.KeyRevoked          key.revoked
//	event.CreditsAdjusted     credits.granted, for a positive amount (credits taken have none)
//	event.PlanChanged         plan.changed
//	event.AccountSuspended    account.suspended
//	event.AccountReactivated  account.reactivated
//	event.AccountClosed       account.closed
//	event.EndpointDisabled    endpoint.disabled
//
// Other events have none: calls, refusals and sweeps, sessions, the deletion of a
// closed account, and the other changes of webhook endpoints, which their owner made. The message's ID is derived from the change's type, account and ID
// ([DerivedID]), so that a change published again with its ID is enqueued once, and its
// Keep is its time plus [ReplayWindow]; a change with no ID gets a random one. The
// data never holds a key's value, nor the address a change came from. Translate is a
// pure function: it reads nothing but e.
func Translate(e event.Event) (Message, bool) {
	c, ok := e.(*event.Change)
	if !ok || c.Type == event.CreditsAdjusted && c.Credits <= 0 {
		return Message{}, false
	}
	typ, ok := translated[c.Type]
	if !ok {
		return Message{}, false
	}
	id := NewID()
	if c.ID != "" {
		id = DerivedID(typ, c.Account, c.ID)
	}
	common := Common{ID: id, Account: c.Account, Actor: c.Actor.ID}
	var d Data
	switch c.Type {
	case event.AccountCreated:
		d = KeyCreatedData{Common: common, Key: c.Key, Primary: true, ExpiresAt: expiry(c.After)}
	case event.KeyCreated:
		d = KeyCreatedData{Common: common, Key: c.Key, Name: c.Name, ExpiresAt: expiry(c.After)}
	case event.KeyUpdated:
		u := KeyUpdatedData{Common: common, Key: c.Key, Name: c.Name, ExpiresAt: expiry(c.After)}
		if c.OldName != c.Name {
			u.PreviousName = c.OldName
			u.Changed = append(u.Changed, "name")
		}
		if !bytes.Equal(c.Before, c.After) {
			u.Changed = append(u.Changed, "restrictions")
		}
		d = u
	case event.KeyRotated:
		d = KeyRotatedData{Common: common, Key: c.Key}
	case event.KeyRevoked:
		d = KeyRevokedData{Common: common, Key: c.Key}
	case event.CreditsAdjusted:
		d = CreditsGrantedData{Common: common, Credits: c.Credits, Reason: c.Reason, ExpiresAt: c.Expires}
	case event.PlanChanged:
		d = PlanChangedData{Common: common, Plan: c.Plan, PreviousPlan: c.OldPlan, EffectiveAt: c.Effective,
			Scheduled: c.Effective.After(c.At), Reason: c.Reason}
	case event.AccountSuspended:
		d = AccountSuspendedData{Common: common, Reason: c.Reason}
	case event.AccountReactivated:
		d = AccountReactivatedData{Common: common, Reason: c.Reason}
	case event.AccountClosed:
		d = AccountClosedData{Common: common, Reason: c.Reason}
	case event.EndpointDisabled:
		d = EndpointDisabledData{Common: common, Endpoint: c.Endpoint, URL: c.URL, Reason: c.Reason, Cause: c.Cause}
	}
	m, err := NewMessage(c.At, d, c.At.Add(ReplayWindow))
	if err != nil {
		return Message{}, false // the id is a message id and the strings are bounded: this does not happen
	}
	return m, true
}

// translated names the event type of each kind of change that has one.
var translated = map[event.Kind]string{
	event.AccountCreated:     KeyCreated,
	event.KeyCreated:         KeyCreated,
	event.KeyUpdated:         KeyUpdated,
	event.KeyRotated:         KeyRotated,
	event.KeyRevoked:         KeyRevoked,
	event.CreditsAdjusted:    CreditsGranted,
	event.PlanChanged:        PlanChanged,
	event.AccountSuspended:   AccountSuspended,
	event.AccountReactivated: AccountReactivated,
	event.AccountClosed:      AccountClosed,
	event.EndpointDisabled:   EndpointDisabled,
}

// expiry returns the expiry of restrictions in their plain JSON form; zero for none.
func expiry(restrictions json.RawMessage) time.Time {
	var r struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	if len(restrictions) == 0 || json.Unmarshal(restrictions, &r) != nil {
		return time.Time{}
	}
	return r.ExpiresAt
}
