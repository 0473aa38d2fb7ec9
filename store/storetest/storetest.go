package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
)

// A behaviour is one row of a suite: a contract, the sentence that states it, and the
// check. The sentence is printed when the check fails, so that an implementer learns the
// rule and not only the symptom.
type behaviour[S any] struct {
	name        string
	explanation string
	check       func(t *testing.T, s S)
}

// run runs every row as its own parallel subtest, on a fresh store from newStore.
func run[S any](t *testing.T, newStore func(*testing.T) S, rows []behaviour[S]) {
	t.Helper()
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if t.Failed() {
					t.Logf("contract: %s", row.explanation)
				}
			}()
			row.check(t, newStore(t))
		})
	}
}

// t0 is the fixed instant every suite starts from. Times are whole seconds, so that
// stores which keep microseconds (PostgreSQL) or milliseconds compare equal.
var t0 = time.Date(2030, time.January, 15, 12, 0, 0, 0, time.UTC)

// at returns the instant d after t0.
func at(d time.Duration) time.Time { return t0.Add(d) }

// ids makes identifiers unique to one subtest, so that stores backed by a shared server
// (one database, one Redis) can run the suites in parallel and repeatedly.
type ids struct{ prefix string }

func newIDs() ids {
	var b [6]byte
	rand.Read(b[:])
	return ids{prefix: "st" + hex.EncodeToString(b[:])}
}

// id returns an identifier made of the subtest's prefix and label; it is a valid account
// id (letters, digits, hyphens, at most 64 characters) for short labels.
func (n ids) id(label string) string { return n.prefix + "-" + label }

// newHash returns the hash of a fresh random key value.
func newHash() auth.Hash { return auth.HashKey(auth.NewKeyValue()) }

// newRequest returns a fresh random request id.
func newRequest() driver.RequestID {
	var id driver.RequestID
	rand.Read(id[:])
	return id
}

// must stops the test if err is not nil: the step is a precondition of the check.
func must(t *testing.T, op string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", op, err)
	}
}

// wantErr reports an error unless err wraps target.
func wantErr(t *testing.T, op string, err, target error) bool {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one wrapping %q", op, err, target)
		return false
	}
	return true
}

// wantNamed reports an error unless err wraps target and its message contains name.
func wantNamed(t *testing.T, op string, err, target error, name string) {
	t.Helper()
	if wantErr(t, op, err, target) && !strings.Contains(err.Error(), name) {
		t.Errorf("%s: error %q does not name %q", op, err, name)
	}
}

// canceled returns a context that is already canceled.
func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
