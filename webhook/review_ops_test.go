package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/store"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestOperatorDisableSticks: an account's endpoint that the operator disabled stays
// disabled for the account's holder, who sees that the operator disabled it and why
// and whose enabling is refused (store.ErrConflict, saying that only the operator
// enables it); the operator enables it again. An endpoint the holder or the deliverer
// disabled is enabled by either, and the operator takes over its disabling.
func TestOperatorDisableSticks(t *testing.T) {
	ctx := t.Context()
	st := memory.NewWebhookStore()
	var published []event.Change
	bus := &event.Bus{}
	bus.Subscribe(event.ObserverFunc(func(_ context.Context, e event.Event) { published = append(published, *e.(*event.Change)) }),
		event.EndpointDisabled, event.EndpointEnabled)
	m := webhook.NewEndpoints(st, bus, nil)
	holder := event.Actor{ID: "key_primary"}
	yes, no := true, false
	ep, err := m.Create(ctx, holder, "acme", "https://hooks.example.com/in", nil)
	if err != nil {
		t.Fatal(err)
	}
	byOperator := func(disabled bool, reason string) (webhook.Endpoint, error) {
		return m.Update(ctx, operator, "acme", ep.ID, webhook.EndpointChange{Disabled: &disabled, Reason: reason, ByOperator: true})
	}
	byHolder := func(disabled bool) (webhook.Endpoint, error) {
		return m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{Disabled: &disabled, Reason: "disabled by the account holder"})
	}
	wantState := func(what string, e webhook.Endpoint, by, reason string) {
		t.Helper()
		if by == "" && (!e.Disabled.IsZero() || e.DisabledBy != "" || e.DisabledReason != "") ||
			by != "" && (e.Disabled.IsZero() || e.DisabledBy != by || e.DisabledReason != reason) {
			t.Errorf("%s: disabled %v by %q for %q; want by %q for %q", what, e.Disabled, e.DisabledBy, e.DisabledReason, by, reason)
		}
		got, err := m.Get(ctx, "acme", ep.ID)
		if err != nil || got.DisabledBy != e.DisabledBy || !got.Disabled.Equal(e.Disabled) {
			t.Errorf("%s: Get says %+v, %v", what, got, err)
		}
	}

	e, err := byOperator(true, "disabled by the operator: it answers 500")
	if err != nil {
		t.Fatal(err)
	}
	wantState("disabled by the operator", e, webhook.DisabledByOperator, "disabled by the operator: it answers 500")
	_, err = byHolder(false)
	wantError(t, "the holder's enabling", err, store.ErrConflict, "only the operator can enable it again")
	e, err = byHolder(true) // changes nothing
	if err != nil {
		t.Fatal(err)
	}
	wantState("the holder disables it again", e, webhook.DisabledByOperator, "disabled by the operator: it answers 500")
	// The holder's other changes are taken; the endpoint stays disabled.
	url2 := "https://hooks.example.com/v2"
	e, err = m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{URL: &url2})
	if err != nil || e.URL != url2 {
		t.Fatalf("the holder's change of the URL: %+v, %v", e, err)
	}
	wantState("the holder changed the URL", e, webhook.DisabledByOperator, "disabled by the operator: it answers 500")
	_, err = m.Update(ctx, holder, "acme", ep.ID, webhook.EndpointChange{URL: &ep.URL, Disabled: &no})
	wantError(t, "the holder's enabling with a change of the URL", err, store.ErrConflict, "only the operator")
	if got, _ := m.Get(ctx, "acme", ep.ID); got.URL != url2 {
		t.Errorf("the refused change stored the URL %q", got.URL)
	}
	_, err = m.SendTest(ctx, holder, "acme", ep.ID)
	wantError(t, "a test of the endpoint the operator disabled", err, store.ErrConflict, "only the operator can enable it again")
	e, err = byOperator(false, "")
	if err != nil {
		t.Fatal(err)
	}
	wantState("enabled by the operator", e, "", "")

	// Disabled by the holder: the holder or the operator enables it; the operator takes
	// its disabling over.
	e, err = byHolder(true)
	if err != nil {
		t.Fatal(err)
	}
	wantState("disabled by the holder", e, webhook.DisabledByAccount, "disabled by the account holder")
	e, err = byOperator(true, "disabled by the operator: abuse")
	if err != nil {
		t.Fatal(err)
	}
	wantState("taken over by the operator", e, webhook.DisabledByOperator, "disabled by the operator: abuse")
	_, err = byHolder(false)
	wantError(t, "the holder's enabling of the endpoint taken over", err, store.ErrConflict, "only the operator")
	if _, err = byOperator(false, ""); err != nil {
		t.Fatal(err)
	}
	if e, err = byHolder(true); err != nil {
		t.Fatal(err)
	}
	if e, err = byHolder(false); err != nil {
		t.Fatalf("the holder enables what the holder disabled: %v", err)
	}
	wantState("enabled by the holder", e, "", "")

	// Disabled by the deliverer: either enables it.
	for _, enable := range []func() (webhook.Endpoint, error){func() (webhook.Endpoint, error) { return byHolder(false) },
		func() (webhook.Endpoint, error) { return byOperator(false, "") }} {
		stored, err := st.Endpoint(ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored.Disabled, stored.DisabledReason, stored.DisabledBy = time.Now(), "the endpoint answered 410 Gone", webhook.DisabledByDelivery
		if _, err := st.UpdateEndpoint(ctx, stored); err != nil {
			t.Fatal(err)
		}
		if e, err = enable(); err != nil {
			t.Fatalf("enabling an endpoint the deliverer disabled: %v", err)
		}
		wantState("enabled after the deliverer disabled it", e, "", "")
	}

	// The operator's own endpoints are the operator's: disabled by the operator.
	own, err := m.Create(ctx, operator, "", "https://ops.example.com/in", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, err = m.Update(ctx, operator, "", own.ID, webhook.EndpointChange{Disabled: &yes}); err != nil || e.DisabledBy != webhook.DisabledByOperator {
		t.Errorf("the operator disables its own endpoint: %+v, %v", e, err)
	}
	if e, err = m.Update(ctx, operator, "", own.ID, webhook.EndpointChange{Disabled: &no}); err != nil || !e.Disabled.IsZero() {
		t.Errorf("the operator enables its own endpoint: %+v, %v", e, err)
	}

	// Every disabling published says who disabled it.
	var causes []string
	for _, c := range published {
		if c.Type == event.EndpointDisabled {
			causes = append(causes, c.Cause)
		}
	}
	want := []string{"operator", "account", "operator", "account", "operator"}
	if !slices.Equal(causes, want) {
		t.Errorf("the causes of the EndpointDisabled published: %q, want %q", causes, want)
	}
}

// TestEndpointNeverPrintsItsSecrets: an Endpoint logged by log/slog (text and JSON,
// alone, by pointer, in a group) or printed by fmt (every verb, in a slice, in a
// struct) shows its id but never its secret nor its previous secret, nor a part of
// them.
func TestEndpointNeverPrintsItsSecrets(t *testing.T) {
	const secret, previous = "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=", "whsec_b2xkb2xkb2xkb2xkb2xkb2xkb2xkb2xkb2xkb2xkMTI="
	e := webhook.Endpoint{ID: "ep_1", Account: "acme", URL: "https://hooks.example.com/in", Types: []string{"key.rotated"},
		Secret: secret, PreviousSecret: previous, PreviousUntil: t0.Add(time.Hour), Disabled: t0, DisabledReason: "maintenance",
		DisabledBy: webhook.DisabledByOperator, Created: t0, Revision: 3}
	var outs []string
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var b bytes.Buffer
		log := slog.New(h(&b))
		log.Info("an endpoint", "endpoint", e)
		log.Info("a pointer", "endpoint", &e)
		log.Info("in a group", slog.Group("g", slog.Any("endpoint", e)))
		log.With("endpoint", e).Info("with")
		log.Info("in a slice", "endpoints", []webhook.Endpoint{e})
		outs = append(outs, b.String())
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%20v"} {
		outs = append(outs, fmt.Sprintf(verb, e), fmt.Sprintf(verb, &e), fmt.Sprintf(verb, []webhook.Endpoint{e}),
			fmt.Sprintf(verb, struct{ E webhook.Endpoint }{e}), fmt.Sprintf(verb, map[string]webhook.Endpoint{"a": e}))
	}
	outs = append(outs, fmt.Sprint(e), fmt.Sprintln(e))
	for _, v := range []any{e, &e, []webhook.Endpoint{e}, struct{ E *webhook.Endpoint }{&e}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(b))
	}
	for _, out := range outs {
		for _, s := range []string{secret, previous, secret[6:14], previous[6:14], "c2VjcmV0", "b2xkb2xk"} {
			if strings.Contains(out, s) {
				t.Errorf("the output shows a secret (%q):\n%s", s, out)
			}
		}
	}
	for _, out := range outs[:2] {
		if !strings.Contains(out, "ep_1") || !strings.Contains(out, webhook.Redacted) || !strings.Contains(out, "maintenance") {
			t.Errorf("the log lacks the endpoint's id, reason or the mark of its redacted secret:\n%s", out)
		}
	}
	if got := fmt.Sprintf("%+v", e); !strings.Contains(got, "ID:ep_1") || !strings.Contains(got, "Secret:"+webhook.Redacted) {
		t.Errorf("%%+v: %s", got)
	}
	if got := fmt.Sprintf("%#v", e); !strings.HasPrefix(got, "webhook.Endpoint{") {
		t.Errorf("%%#v: %s", got)
	}
	if got := fmt.Sprintf("%+v", webhook.Endpoint{ID: "ep_2"}); !strings.Contains(got, "Secret: ") {
		t.Errorf("an endpoint without a secret shows one: %s", got)
	}
	if e.Secret != secret {
		t.Error("printing changed the endpoint")
	}
}

// TestWebhooksDisabledTellsTheOperator: when the deliverer disables an account's
// endpoint, the operator's endpoints receive endpoint.disabled with what the operator
// needs to act (the endpoint, its account, its URL, the cause and the reason), and
// the account's other endpoint the same body, which holds nothing of another account;
// another account's endpoints receive nothing. When it disables an operator's endpoint,
// only the operator's other endpoints hear of it.
func TestWebhooksDisabledTellsTheOperator(t *testing.T) {
	a := assemble(t, nil, webhook.Options{AllowPrivate: true}, true)
	gone := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	holderTold, opTold, other := newReceiver(t, ok), newReceiver(t, ok), newReceiver(t, ok)
	g := a.endpoint("acme", gone.URL, webhook.KeyRotated)
	h := a.endpoint("acme", holderTold.URL, webhook.EndpointDisabled)
	op := a.endpoint("", opTold.URL, webhook.EndpointDisabled)
	globex := a.endpoint("globex", other.URL)

	a.rotated("acme", "change-1")
	eventually(t, "endpoint.disabled delivered to the holder's and the operator's endpoints", func() bool {
		return len(holderTold.got()) == 1 && len(opTold.got()) == 1
	})
	verified(t, op.Secret, opTold.got())
	verified(t, h.Secret, holderTold.got())
	body := opTold.got()[0].body
	if !bytes.Equal(body, holderTold.got()[0].body) {
		t.Errorf("the operator's and the holder's copies differ:\n%s\n%s", body, holderTold.got()[0].body)
	}
	var msg struct {
		Type string
		Data map[string]any
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"account": "acme", "actor": "service", "endpoint": g.ID, "url": gone.URL, "cause": "gone"}
	for k, v := range want {
		if msg.Data[k] != v {
			t.Errorf("data.%s = %v, want %v (%s)", k, msg.Data[k], v, body)
		}
	}
	if r, _ := msg.Data["reason"].(string); !strings.Contains(r, "410") {
		t.Errorf("data.reason = %q, want the 410 that disabled it", r)
	}
	keys := slices.Sorted(maps.Keys(msg.Data))
	if want := []string{"account", "actor", "cause", "endpoint", "id", "reason", "url"}; msg.Type != webhook.EndpointDisabled || !slices.Equal(keys, want) {
		t.Errorf("the message is %s with %q, want %s with %q", msg.Type, keys, webhook.EndpointDisabled, want)
	}
	for _, s := range []string{"globex", globex.ID, other.URL, g.Secret, h.Secret, op.Secret} {
		if strings.Contains(string(body), s) {
			t.Errorf("the endpoint.disabled of acme's endpoint holds %q:\n%s", s, body)
		}
	}

	// An operator's endpoint disabled: only the operator's other endpoints hear of it.
	opGone := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	og := a.endpoint("", opGone.URL, webhook.KeyRevoked)
	a.bus.Publish(t.Context(), &event.Change{Type: event.KeyRevoked, ID: "change-2", At: time.Now(), Actor: operator, Account: "acme", Key: "key_1"})
	eventually(t, "endpoint.disabled of the operator's endpoint delivered to the operator's other endpoint", func() bool {
		return len(opTold.got()) == 2
	})
	var opMsg struct{ Data map[string]any }
	if err := json.Unmarshal(opTold.got()[1].body, &opMsg); err != nil {
		t.Fatal(err)
	}
	if opMsg.Data["endpoint"] != og.ID || opMsg.Data["account"] != nil || opMsg.Data["cause"] != "gone" {
		t.Errorf("the endpoint.disabled of the operator's endpoint: %s", opTold.got()[1].body)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(holderTold.got()); n != 1 {
		t.Errorf("the holder's endpoint received %d messages, want 1 (nothing of the operator's endpoint)", n)
	}
	for _, r := range other.got() {
		if bytes.Contains(r.body, []byte(webhook.EndpointDisabled)) {
			t.Errorf("another account's endpoint received %s", r.body)
		}
	}
}
