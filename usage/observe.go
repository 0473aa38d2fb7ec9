package usage

import (
	"context"

	"github.com/tollgate-dev/tollgate/event"
)

// Kinds returns the kinds of events the recorder counts: calls that ran and calls that
// were refused.
func (r *Recorder) Kinds() []event.Kind {
	return []event.Kind{event.CallFinished, event.CallRefused}
}

// Observe counts the calls of e, one record per API: for a call that ran, its outcome
// ([OK] or the code of its failure), the credits it was charged after any refund, and
// how long it ran; for a call refused, its code, no credits and no latency. It is an
// [event.Observer]; subscribe it to a service's events:
//
//	svc.Events().Subscribe(rec, rec.Kinds()...)
func (r *Recorder) Observe(_ context.Context, e event.Event) {
	switch e := e.(type) {
	case *event.Call:
		for _, a := range e.APIs {
			rec := Record{At: e.At, Account: e.Account, Key: e.Key, API: a.API, Channel: e.Channel,
				Outcome: OK, Credits: a.Credits, Duration: a.Duration}
			if a.Code != "" {
				rec.Outcome = a.Code
			}
			r.Record(rec)
		}
	case *event.Refusal:
		for _, api := range e.APIs {
			r.Record(Record{At: e.At, Account: e.Account, Key: e.Key, API: api, Channel: e.Channel,
				Outcome: e.Code, Refused: true})
		}
	}
}
