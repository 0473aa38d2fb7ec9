package redis

import (
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestFenceKeys checks that the fence key of a key's slot hashes to that slot, for
// every slot, so that the fence is written on the node that ran the writes it follows.
func TestFenceKeys(t *testing.T) {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}) // never contacted
	defer c.Close()
	r := &replication{cluster: c, prefix: "p"}
	tags := fenceTags()
	for s := range 16384 {
		if got := int(crc16("~w"+strconv.FormatUint(uint64(tags[s]), 10)) % 16384); got != s {
			t.Fatalf("the fence tag of slot %d is in slot %d", s, got)
		}
	}
	for _, key := range []string{"p:{acct-1}:bal", "p:kid:key-1", "p:h:00ff", "p:revoked", "a}b", "{}x", "p:{~wh}:E", "p:{~x12}:expiring"} {
		if got, want := keySlot(r.fenceKey(key)), keySlot(key); got != want {
			t.Errorf("the fence key of %q, %q, is in slot %d, want %d", key, r.fenceKey(key), got, want)
		}
	}
	if one := (&replication{prefix: "p"}).fenceKey("p:{a}:bal"); one != "p:{~w}:fence" {
		t.Errorf("the fence key of a client of one server is %q", one)
	}
}
