package webhook

import (
	"net/http"
	"time"
)

// SetTransport makes d send its attempts through rt, in place of its checked
// transport: for the tests that run in a synctest bubble, where no real connection
// may be made.
func SetTransport(d *Deliverer, rt http.RoundTripper) { d.client.Transport = rt }

// RefusedDestination is the error of an attempt at a destination the address policy
// refuses.
const RefusedDestination = refusedDestination

// SetCleanupRetry sets how often w's Run tries again to delete the endpoints of
// deleted accounts, for the tests that would not wait 30 seconds.
func SetCleanupRetry(w *Webhooks, every time.Duration) { w.retry = every }
