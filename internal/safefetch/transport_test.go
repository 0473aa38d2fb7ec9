package safefetch

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTransport checks that requests of the caller's own through the Fetcher's
// transport are held to the address policy at dial time, DNS rebinding included,
// and are not when the policy is off.
func TestTransport(t *testing.T) {
	var hits atomic.Int32
	srv := serve(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	}))
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	var lookups atomic.Int32
	dns := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	}
	post := func(f *Fetcher, u string) error {
		req, err := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: f.Transport()}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	f := testFetcher(Options{Resolve: dns})
	if err := f.Check(context.Background(), "http://rebind.test:"+port+"/"); err != nil {
		t.Fatalf("Check: %v", err)
	}
	err := post(f, "http://rebind.test:"+port+"/")
	e := wantReason(t, err, ReasonBlocked)
	if strings.Contains(e.Error(), "127.0.0.2") {
		t.Errorf("message names the address: %q", e)
	}
	wantReason(t, post(f, srv.URL), ReasonBlocked)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the blocked server got %d requests", n)
	}

	open := testFetcher(Options{AllowPrivate: true})
	if err := post(open, srv.URL); err != nil {
		t.Fatalf("with AllowPrivate: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the server got %d requests, want 1", n)
	}
}

func TestValidateURL(t *testing.T) {
	tests := []struct {
		url  string
		want Reason // 0 for valid
	}{
		{"https://example.com/hook", 0},
		{"http://example.com:8080/hook?x=1", 0},
		{"http://127.0.0.1/hook", 0}, // the address is the dial's business
		{"ftp://example.com/hook", ReasonScheme},
		{"example.com/hook", ReasonScheme},
		{"https://user:pass@example.com/hook", ReasonBadURL},
		{"https:///hook", ReasonBadURL},
		{"https://example.com:0/", ReasonBadURL},
		{"https://example.com:99999/", ReasonBadURL},
		{"", ReasonBadURL},
		{"https://example.com/" + strings.Repeat("x", MaxURLLength), ReasonBadURL},
		{"http://[::1", ReasonBadURL},
	}
	for _, tt := range tests {
		err := ValidateURL(tt.url)
		if tt.want == 0 {
			if err != nil {
				t.Errorf("%q: %v", tt.url, err)
			}
			continue
		}
		e := wantReason(t, err, tt.want)
		if tt.url != "" && len(tt.url) < 100 && e.URL == "" {
			t.Errorf("%q: the error does not name the url", tt.url)
		}
	}
}
