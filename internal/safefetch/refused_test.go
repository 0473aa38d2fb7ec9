package safefetch

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// refusedText is the message of every refused destination, after the host.
const refusedText = "cannot be fetched from: files are fetched only from hosts with public internet addresses; check the url"

// TestRefusedDestinationsLookAlike checks that a host name that does not exist,
// cannot be resolved, has no addresses, or resolves to a blocked address gets one
// message, so that an outsider cannot map internal names by the answers; and that the
// detail goes to the log, at Info or Warn (a client's doing, not an error of the
// service). (An IP literal is told why it is refused: that says nothing the address
// does not.)
func TestRefusedDestinationsLookAlike(t *testing.T) {
	dns := fakeDNS(map[string][]string{
		"internal.test": {"10.0.0.1"},
		"loopback.test": {"127.0.0.1"},
		"metadata.test": {"169.254.169.254"},
		"mixed.test":    {"93.184.216.34", "192.168.1.1"},
		"empty.test":    {},
	})
	tests := []struct {
		host   string
		level  string
		detail string // in the log record
	}{
		{"missing.test", "INFO", "does not exist"},
		{"empty.test", "INFO", "has no addresses"},
		{"broken.test", "WARN", "could not be resolved"},
		{"internal.test", "WARN", "a private address"},
		{"loopback.test", "WARN", "a loopback address"},
		{"metadata.test", "WARN", "a cloud metadata address"},
		{"mixed.test", "WARN", "a private address"},
	}
	for _, fetch := range []bool{false, true} {
		name := "Check"
		if fetch {
			name = "Fetch"
		}
		t.Run(name, func(t *testing.T) {
			var logs testenv.Logs
			f := testFetcher(Options{blocked: Blocked, Resolve: dns, Logger: logs.Logger()})
			want := ""
			for _, tt := range tests {
				u := "http://" + tt.host + "/file.png"
				var err error
				if fetch {
					_, err = f.Fetch(context.Background(), u, 0)
				} else {
					err = f.Check(context.Background(), u)
				}
				e, ok := err.(*Error)
				if !ok {
					t.Fatalf("%s: %v", u, err)
				}
				msg := strings.ReplaceAll(e.Error(), tt.host, "HOST")
				if want == "" {
					want = msg
					if !strings.Contains(want, refusedText) {
						t.Fatalf("message %q", want)
					}
				}
				if msg != want {
					t.Errorf("%s: message %q\nwant (host aside) %q", u, e, want)
				}
			}
			records := logs.Records(t)
			if len(records) != len(tests) {
				t.Fatalf("%d log records, want %d: %+v", len(records), len(tests), records)
			}
			for i, tt := range tests {
				r := records[i]
				if r.Level != tt.level || !strings.Contains(r.Attrs["detail"].(string), tt.detail) {
					t.Errorf("%s: logged %s %q %v; want %s with %q", tt.host, r.Level, r.Msg, r.Attrs, tt.level, tt.detail)
				}
			}
			if got := records[3].Attrs["address"]; got != "10.0.0.1" {
				t.Errorf("the log does not name the blocked address: %v", records[3].Attrs)
			}
		})
	}
}
