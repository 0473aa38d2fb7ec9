package memory_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/storetest"
	"github.com/tollgate-dev/tollgate/usage"
)

func TestUsageStore(t *testing.T) {
	storetest.TestUsageStore(t, func(*testing.T) usage.Store { return memory.NewUsageStore() })
}
