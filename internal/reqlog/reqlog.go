// Package reqlog is the record of one HTTP request that the access log writes (package
// edge): the edge puts a [Record] in the request's context, and what learns who the
// caller is, or what the request called, notes it there. Every method is safe on a nil
// Record (a request the access log does not see), and safe for concurrent use: the
// APIs of a GraphQL query and the items of a batch note their calls in parallel.
package reqlog

import (
	"context"
	"slices"
	"sync"
)

// A Record is what one request did, as far as the access log tells it.
type Record struct {
	mu      sync.Mutex
	door    string
	account string
	key     string // the key's id, never its value
	apis    []string
	code    string
	credits int64
}

// A Snapshot is a copy of a Record's fields.
type Snapshot struct {
	Door, Account, Key string
	APIs               []string
	Code               string
	Credits            int64
}

type ctxKey struct{}

// With returns ctx carrying rec.
func With(ctx context.Context, rec *Record) context.Context {
	return context.WithValue(ctx, ctxKey{}, rec)
}

// From returns the record ctx carries, or nil.
func From(ctx context.Context) *Record {
	rec, _ := ctx.Value(ctxKey{}).(*Record)
	return rec
}

// SetDoor names the door that serves the request: the last name set wins, so that a
// door that serves several kinds of request (REST's batches) names them itself.
func (r *Record) SetDoor(door string) {
	if r == nil || door == "" {
		return
	}
	r.mu.Lock()
	r.door = door
	r.mu.Unlock()
}

// Identify notes the account and the id of the key (empty for a session that names
// none) the request was authenticated as. An empty account leaves the record as it
// was.
func (r *Record) Identify(account, keyID string) {
	if r == nil || account == "" {
		return
	}
	r.mu.Lock()
	r.account = account
	if keyID != "" {
		r.key = keyID
	}
	r.mu.Unlock()
}

// Call notes a call of the request: the APIs it named, what it was charged, and the
// code of its failure (empty for a success; the first failure noted is kept).
func (r *Record) Call(apis []string, credits int64, code string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	for _, api := range apis {
		if !slices.Contains(r.apis, api) {
			r.apis = append(r.apis, api)
		}
	}
	r.credits += credits
	if r.code == "" {
		r.code = code
	}
	r.mu.Unlock()
}

// Snapshot returns a copy of the record.
func (r *Record) Snapshot() Snapshot {
	if r == nil {
		return Snapshot{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Snapshot{Door: r.door, Account: r.account, Key: r.key, APIs: slices.Clone(r.apis), Code: r.code, Credits: r.credits}
}
