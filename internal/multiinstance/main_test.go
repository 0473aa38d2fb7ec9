package multiinstance_test

import (
	"os"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis() // the fault tests stop Redis on purpose
	os.Exit(m.Run())
}
