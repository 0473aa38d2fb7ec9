package postgres_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

func TestOAuthStore(t *testing.T) {
	storetest.TestOAuthStore(t, func(t *testing.T) oauthstore.Store {
		s, err := postgres.NewOAuthStore(newPool(t, 16))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
