package redis

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/auth"
)

// errLifecycle reports the account lifecycle's methods, which this store does not
// implement yet.
var errLifecycle = fmt.Errorf("redis: the account lifecycle is not implemented yet: %w", errors.ErrUnsupported)

// UpdateAccount is not implemented yet.
func (s *Store) UpdateAccount(ctx context.Context, u auth.AccountUpdate) (auth.Account, error) {
	return auth.Account{}, errLifecycle
}

// Accounts is not implemented yet.
func (s *Store) Accounts(ctx context.Context, q auth.AccountQuery) (auth.AccountPage, error) {
	return auth.AccountPage{}, errLifecycle
}

// DeleteAccount is not implemented yet.
func (s *Store) DeleteAccount(ctx context.Context, id string) error { return errLifecycle }
