package tollgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/meter"
)

// who identifies the caller of a running call, for handlers and logs. (Passing it
// rather than the Principal keeps the Principal on its owner's stack.)
type who struct {
	account, key string
	untraced     bool // see Principal.untraced
}

// execute runs the invocations in parallel under the call timeout: the first on the
// calling goroutine, the others on goroutines of their own. A handler is expected to
// return once its context is done; one that does not delays the answer but not the
// accounting, because invoke judges by the context, not by the clock. When an observer
// wants calls, took holds how long each invocation ran (nil otherwise). For a call of one
// API, one (not nil) holds the results, the timing, the context and the handler's
// request, and the caller sets took[0] (see Service.run).
func (s *Service) execute(parent context.Context, w who, t *meter.Ticket, invs []invocation, one *single) (results []Result, took []time.Duration) {
	var (
		cc  *callContext
		req *catalog.Request
	)
	if one != nil {
		cc, req, results = &one.ctx, &one.req, one.result[:]
		cc.init(parent, s.timeout)
		if s.events.Wants(event.CallFinished) {
			took = one.took[:]
		}
	} else {
		cc = newCallContext(parent, s.timeout)
		results = make([]Result, len(invs))
		if s.events.Wants(event.CallFinished) {
			took = make([]time.Duration, len(invs))
		}
	}
	defer cc.release()
	var ctx context.Context = cc
	if s.renewEvery > 0 && t.HoldsSlot() {
		defer s.keepSlot(ctx, w, t, s.renewEvery)()
	}
	var others *sync.WaitGroup
	if len(invs) > 1 {
		others = s.startOthers(ctx, w, invs, results, took)
	}
	timed := took
	if one != nil {
		timed = nil // a call of one API: its run is the call's, which Service.run times
	}
	s.invokeAt(ctx, w, invs, 0, results, timed, req)
	if others != nil {
		others.Wait()
	}
	return results, took
}

// startOthers runs invs[1:] into results (and took) on goroutines of their own, and
// returns what to wait on. (Apart from execute, so that a call of one API, the most
// common, allocates neither the WaitGroup nor the closures' variables.)
func (s *Service) startOthers(ctx context.Context, w who, invs []invocation, results []Result, took []time.Duration) *sync.WaitGroup {
	wg := new(sync.WaitGroup)
	for i := 1; i < len(invs); i++ {
		wg.Go(func() { s.invokeAt(ctx, w, invs, i, results, took, nil) })
	}
	return wg
}

// invokeAt runs invs[i] into results[i], and times it into took[i] if took is not nil.
// req, if not nil, is where the handler's request is made (see invoke).
// The run is one [event.StepRun] phase, whose context the handler gets.
func (s *Service) invokeAt(ctx context.Context, w who, invs []invocation, i int, results []Result, took []time.Duration, req *catalog.Request) {
	ctx, end := s.begin(ctx, w.untraced, event.Phase{Step: event.StepRun, API: invs[i].API.ID})
	if took == nil {
		results[i] = s.invoke(ctx, w, &invs[i], req)
	} else {
		start := s.now()
		results[i] = s.invoke(ctx, w, &invs[i], req)
		took[i] = s.now().Sub(start)
	}
	end(results[i].failure())
}

// keepSlot renews the call's concurrency slot every interval until the returned
// function is called. Only calls that may outlive half a lease need it (see New and
// executeBatch).
func (s *Service) keepSlot(ctx context.Context, w who, ticket *meter.Ticket, every time.Duration) (stop func()) {
	t := *ticket // a copy, so that the caller's ticket stays on its stack
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(every, func() {
		if err := s.meter.Renew(ctx, &t, s.now()); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "tollgate: cannot renew a concurrency slot", "account", w.account, "error", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer.Reset(every)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// invoke runs one invocation: fetches its file in the URL form, then calls the handler,
// turning a panic into a failure on the service's side. The handler's request is made
// in req, or in a new one when req is nil.
func (s *Service) invoke(ctx context.Context, w who, inv *invocation, req *catalog.Request) (r Result) {
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(ctx, "tollgate: API handler panicked", "api", inv.API.ID, "panic", v, "stack", string(debug.Stack()))
			r = Result{Err: newError(CodeAPIFailed, "the API failed; you were not charged", fmt.Errorf("panic: %v", v))}
		}
	}()
	file := inv.File
	if inv.FileURL != "" {
		f, err := s.fetcher.Fetch(ctx, inv.FileURL, inv.API.File.MaxBytes)
		if err != nil {
			return Result{Err: asError(fetchError(err))}
		}
		file = &catalog.File{Name: f.Name, Data: f.Data}
		if err := checkFile(inv.API, file); err != nil {
			return Result{Err: asError(err)}
		}
	}
	if req == nil {
		req = new(catalog.Request)
	}
	*req = catalog.Request{
		API: inv.API, Params: inv.Params, File: file,
		AccountID: w.account, KeyID: w.key,
	}
	data, err := inv.API.Handler.ServeAPI(ctx, req)
	credits := req.Charged() // what a kept result (a success, a rejection) is charged
	if err == nil {
		if data == nil {
			data = struct{}{}
		}
		b, err := json.Marshal(data)
		if err == nil && (len(b) == 0 || b[0] != '{') {
			err = fmt.Errorf("the result encodes to %.20s, not a JSON object", b)
		}
		if err != nil {
			s.log.ErrorContext(ctx, "tollgate: API result cannot be encoded", "api", inv.API.ID, "error", err)
			return Result{Err: newError(CodeAPIFailed, "the API failed; you were not charged", err)}
		}
		return Result{Data: data, JSON: b, credits: credits}
	}
	var rej *catalog.RejectError
	switch {
	case errors.As(err, &rej):
		return Result{Err: newError(CodeRejected, rej.Message, err), credits: credits}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Result{Err: newError(CodeTimeout, fmt.Sprintf("the API did not answer within %s; you were not charged", s.timeout), err)}
	case ctx.Err() != nil:
		return Result{Err: newError(CodeAPIFailed, "the call was canceled; you were not charged", err)}
	}
	s.log.ErrorContext(ctx, "tollgate: API failed", "api", inv.API.ID, "error", err)
	return Result{Err: newError(CodeAPIFailed, "the API failed; you were not charged", err)}
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return newError(CodeInternal, "internal error", err)
}
