package postgres_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
	"github.com/tollgate-dev/tollgate/usage"
)

func TestUsageStore(t *testing.T) {
	storetest.TestUsageStore(t, func(t *testing.T) usage.Store {
		s, err := postgres.NewUsageStore(newPool(t, 16))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
