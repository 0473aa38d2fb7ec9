package webhook

import "net/http"

// SetTransport makes d send its attempts through rt, in place of its checked
// transport: for the tests that run in a synctest bubble, where no real connection
// may be made.
func SetTransport(d *Deliverer, rt http.RoundTripper) { d.client.Transport = rt }

// RefusedDestination is the error of an attempt at a destination the address policy
// refuses.
const RefusedDestination = refusedDestination
