package testenv_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestFull checks who turns the full suite on: CI=true whatever TOLLGATE_TEST_FULL
// says, otherwise TOLLGATE_TEST_FULL alone.
func TestFull(t *testing.T) {
	for _, tt := range []struct {
		ci, full string
		want     bool
	}{
		{"", "", false},
		{"", "0", false},
		{"", "false", false},
		{"", "yes please", false},
		{"", "1", true},
		{"", "true", true},
		{"false", "1", true},
		{"true", "", true},
		{"true", "0", true},
	} {
		t.Setenv("CI", tt.ci)
		t.Setenv(testenv.FullSuite, tt.full)
		if got := testenv.Full(); got != tt.want {
			t.Errorf("CI=%q %s=%q: Full() = %t, want %t", tt.ci, testenv.FullSuite, tt.full, got, tt.want)
		}
	}
}
