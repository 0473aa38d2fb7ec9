package usage

import (
	"testing"
	"unsafe"
)

// Shards fill whole cache lines, so that cores recording into different shards do not
// share one.
func TestShardSize(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n%64 != 0 {
		t.Errorf("a shard is %d bytes, not a whole number of 64-byte cache lines", n)
	}
}
