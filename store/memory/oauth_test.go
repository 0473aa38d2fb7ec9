package memory_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/oauth/oauthstore"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/store/storetest"
)

func TestOAuthStore(t *testing.T) {
	storetest.TestOAuthStore(t, func(*testing.T) oauthstore.Store { return memory.NewOAuthStore() })
}
