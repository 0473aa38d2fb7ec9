package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGenerated checks that decorators_gen.go is what decorgen writes: run
// "go generate ./metrics" after changing a store interface or the lists of decorgen.
func TestGenerated(t *testing.T) {
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../decorators_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("metrics/decorators_gen.go is not what decorgen writes: run go generate ./metrics")
	}
}
