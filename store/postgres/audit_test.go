package postgres_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/store/postgres"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

func TestAuditStore(t *testing.T) {
	storetest.TestAuditStore(t, func(t *testing.T) audit.Store {
		s, err := postgres.NewAuditStore(newPool(t, 16))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
