package testenv_test

import (
	"net"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

func TestServers(t *testing.T) {
	for _, s := range []*testenv.Server{testenv.StartRedis(t), testenv.StartPostgres(t)} {
		if c, err := net.Dial("tcp", s.Addr); err != nil {
			t.Fatal(err)
		} else {
			c.Close()
		}
		s.Stop()
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
			t.Fatalf("%s still answers after Stop", s.Addr)
		}
		s.Start()
		if c, err := net.Dial("tcp", s.Addr); err != nil {
			t.Fatalf("%s does not answer after Start: %v", s.Addr, err)
		} else {
			c.Close()
		}
	}
}
