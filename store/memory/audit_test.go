package memory_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

func TestAuditStore(t *testing.T) {
	storetest.TestAuditStore(t, func(*testing.T) audit.Store { return memory.NewAuditStore() })
}
