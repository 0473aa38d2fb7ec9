package webhook_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/store"
)

// TestReviewSingleLabelHostRefused: a host name without a dot ("intranet",
// "db-primary") is taken, and the deliverer resolves it with the system resolver's
// search domains: it names a host of the service's own network ("db-primary.corp").
// The dial-time check refuses a private address, but not an internal service on a
// public address (split-horizon DNS, a cloud host whose firewall admits the service's
// egress address), and the lookups themselves probe the internal zone.
//
// Fix: refuse a host without a dot (as localhost is refused), and resolve names as
// rooted ("name.") so that no search domain applies.
func TestReviewSingleLabelHostRefused(t *testing.T) {
	env := newEndpoints(t, nil)
	for _, url := range []string{"https://intranet/hook", "http://db-primary:8080/"} {
		_, err := env.m.Create(t.Context(), holder, "acme", url, nil)
		if err == nil {
			t.Errorf("%s: taken", url)
			continue
		}
		wantError(t, url, err, store.ErrInvalid, "url")
	}
}
