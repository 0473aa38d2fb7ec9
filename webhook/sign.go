package webhook

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// Secrets returns the secrets that sign a delivery to the endpoint at now: its Secret,
// then its PreviousSecret while now is before PreviousUntil.
func (e Endpoint) Secrets(now time.Time) []string {
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		return []string{e.Secret, e.PreviousSecret}
	}
	return []string{e.Secret}
}

// Sign sets on h the headers of an attempt made at now to deliver m to e, by the
// Standard Webhooks scheme (package signature): webhook-id (m.ID), webhook-timestamp
// (now, in Unix seconds) and webhook-signature, with one token for each of e's secrets
// at now. It fails, setting nothing, if a secret of e is malformed or m has no ID.
func Sign(h http.Header, e Endpoint, m Message, now time.Time) error {
	sig, err := signature.Sign(m.ID, now, m.Body, e.Secrets(now)...)
	if err != nil {
		return err
	}
	h.Set(signature.HeaderID, m.ID)
	h.Set(signature.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(signature.HeaderSignature, sig)
	return nil
}
