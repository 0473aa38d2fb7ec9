package journal_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/journal"
	"github.com/tollgate-dev/tollgate/webhook"
)

// TestDedupWindowIsTheOutboxs checks that the webhook outbox remembers a change's ID
// at least as long as journal.DedupWindow, which bounds a relay's MaxAge: a change
// that a relay publishes again is then enqueued once.
func TestDedupWindowIsTheOutboxs(t *testing.T) {
	if webhook.ReplayWindow < journal.DedupWindow {
		t.Errorf("webhook.ReplayWindow (%s) is shorter than journal.DedupWindow (%s): a relay could publish a change the outbox no longer remembers", webhook.ReplayWindow, journal.DedupWindow)
	}
}
