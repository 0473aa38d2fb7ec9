package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/internal/groupcommit"
	"github.com/tollgate-dev/tollgate/retention"
	"github.com/tollgate-dev/tollgate/store"
)

// Store is every Tollgate store on one PostgreSQL database: the key store, the ledger,
// the rate limiter, the concurrency limiter, the key checker, and the [driver.Admitter]
// that performs all of their parts of an admission in one function call. Give the one
// value to every role, so that the Meter sends each admission and each settlement in
// one round trip.
//
// A Store holds no state of its own besides its options: every instance sharing the
// database sees every change on its next call. It is safe for concurrent use when its
// DB is (a pool is). It does not own the DB: the host closes its pool. Create it with
// [New], after [Migrate] has run.
type Store struct {
	db     DB
	shards int
	admits *groupcommit.Combiner[*admitParams, admitRow] // nil when Options.Batch is 1
	closes *groupcommit.Combiner[*closeParams, closeRow] // nil when Options.Batch is 1
	// home is the shard, modulo an account's shards, that this Store's batches of
	// admissions take from first, so that the batches of instances lock different rows.
	home int32
	// scan is the most accounts a page of Accounts examines; 0 is accountScan.
	scan int
}

// Options configures a [Store]. A nil *Options is the default.
type Options struct {
	// Shards is the number of sub-balances an account's credits are split into when its
	// balance is opened (Open), from 1 to 1024. The default, 1, is a single balance row,
	// which serializes the reservations of one account (see the package documentation,
	// "Hot accounts"); more shards let that many reservations of one account commit in
	// parallel. Change the shards of an existing account with [Store.SetShards].
	//
	// With more shards than instances, the instances' batches (Options.Batch) of one
	// account take their credits from different shards and do not wait for each other:
	// each Store picks a home shard at random, and a batch takes from the first shard
	// from its home on that covers it and that no other transaction holds.
	Shards int

	// Batch is the largest number of concurrent Admit calls (and, separately, Close
	// calls) of one account that the Store sends together, in one function call and one
	// transaction. A call for an account that has no call in flight is sent at once,
	// with the calls of that account that the goroutines ready to run make as it lets
	// them go first (alone, on an idle service); calls for that account that arrive
	// meanwhile wait for it and are then sent together. This is how one instance keeps a hot account from serializing on its
	// rows (see the package documentation, "Hot accounts"), at no cost to accounts
	// called one at a time. The default, 0, is [DefaultBatch]; 1 sends every call on its
	// own. Batches are per instance: the batches of several instances on an account of
	// one shard wait for each other, on an account of several (Options.Shards) they take
	// from different shards.
	Batch int
}

// DefaultBatch is the default [Options.Batch].
const DefaultBatch = 64

// MaxShards is the largest number of sub-balances an account may have.
const MaxShards = 1024

// Interface guards.
var (
	_ auth.KeyStore             = (*Store)(nil)
	_ auth.KeyExpiries          = (*Store)(nil)
	_ driver.Ledger             = (*Store)(nil)
	_ driver.RateLimiter        = (*Store)(nil)
	_ driver.ConcurrencyLimiter = (*Store)(nil)
	_ driver.KeyChecker         = (*Store)(nil)
	_ driver.Admitter           = (*Store)(nil)
	_ driver.Sweeper            = (*Store)(nil)
	_ retention.Compactor       = (*Store)(nil)
)

// New returns a Store on db. It does not touch the database: run [Migrate] first. opts
// may be nil.
func New(db DB, opts *Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("postgres: New needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	s := &Store{db: db, shards: 1, home: rand.Int32N(MaxShards)}
	if opts != nil && opts.Shards != 0 {
		if opts.Shards < 1 || opts.Shards > MaxShards {
			return nil, fmt.Errorf("postgres: Options.Shards is %d; give 1 to %d", opts.Shards, MaxShards)
		}
		s.shards = opts.Shards
	}
	size := DefaultBatch
	if opts != nil && opts.Batch != 0 {
		size = opts.Batch
	}
	if size < 0 {
		return nil, fmt.Errorf("postgres: Options.Batch is %d; give 1 (no batching) or more, or 0 for the default", size)
	}
	if size > 1 {
		s.admits = groupcommit.New(size, s.admitBatch)
		s.closes = groupcommit.New(size, s.closeBatch)
	}
	return s, nil
}

// SetShards splits the account's credits into n sub-balances (1 to [MaxShards]), in one
// call: the remaining credits are spread evenly, and the period's used credits and call
// counts are kept. It makes a hot account take reservations in parallel (or folds it
// back into one balance row with n = 1) without stopping traffic: calls on the account
// wait for it for the duration of one statement. It returns an error wrapping
// store.ErrNotFound if the account has no balance.
func (s *Store) SetShards(ctx context.Context, account string, n int) error {
	if n < 1 || n > MaxShards {
		return fmt.Errorf("postgres: balance of account %q: %d shards; give 1 to %d", account, n, MaxShards)
	}
	if err := ctx.Err(); err != nil {
		return wrapErr(ctx, err, "balance of account %q", account)
	}
	var found bool
	if err := s.db.QueryRow(ctx, `SELECT tollgate_set_shards($1, $2)`, account, n).Scan(&found); err != nil {
		return wrapErr(ctx, err, "balance of account %q", account)
	}
	if !found {
		return fmt.Errorf("postgres: balance of account %q: %w", account, store.ErrNotFound)
	}
	return nil
}

// wrapErr returns err with the message "postgres: " and what happened. A missing row
// wraps store.ErrNotFound and a unique violation store.ErrConflict. Anything else also
// wraps store.ErrUnavailable, which is what it means to the service (a lost connection,
// a timeout, a server error), except a canceled context, which is the caller's doing;
// the original error stays in the chain (a *pgconn.PgError for errors.As). When ctx has
// ended, the error matches ctx.Err() with errors.Is, even when the server reported the
// cancellation in its own words ("canceling statement due to user request").
func wrapErr(ctx context.Context, err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("postgres: %s: %w", what, store.ErrNotFound)
	case isCode(err, uniqueViolation):
		return fmt.Errorf("postgres: %s: %w", what, store.ErrConflict)
	case isClass(err, dataException), isClass(err, integrityViolation), isStatementError(err, protocolViolation):
		// A value the database cannot hold (invalid UTF-8, a NUL byte, a number out of
		// range) or a constraint it breaks: the caller's doing, not an outage. In pgx's
		// simple_protocol mode the arguments are part of the query's text, and a NUL
		// byte in one makes the server refuse the message as malformed (08P01).
		return fmt.Errorf("postgres: %s: %w: %w", what, store.ErrInvalid, err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("postgres: %s: %w", what, err)
	}
	return fmt.Errorf("postgres: %s: %w: %w", what, store.ErrUnavailable, err)
}

// SQLSTATE codes the store tells apart.
const (
	uniqueViolation       = "23505"
	foreignKeyViolation   = "23503"
	invalidSchemaName     = "3F000" // "no schema has been selected to create in"
	insufficientPrivilege = "42501"
	protocolViolation     = "08P01" // "invalid message format": a NUL byte in a simple query
)

// SQLSTATE classes the store tells apart: their first two characters.
const (
	dataException      = "22"
	integrityViolation = "23"
)

// isClass reports whether err is a server error of the given SQLSTATE class.
func isClass(err error, class string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && len(pe.Code) == 5 && pe.Code[:2] == class
}

// isCode reports whether err is a server error with the given SQLSTATE.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// isStatementError reports whether err is a server error with the given SQLSTATE that
// failed one statement, not the session (severity ERROR, not FATAL).
func isStatementError(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code && pe.Severity == "ERROR"
}

// constraint returns the name of the constraint a server error violated, or "".
func constraint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.ConstraintName
	}
	return ""
}
