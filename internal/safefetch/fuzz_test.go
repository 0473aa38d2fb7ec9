package safefetch

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		"https://example.com/file.pdf",
		"http://example.com:8080/a/b?c=d#e",
		"HTTP://EXAMPLE.COM/",
		"http://8.8.8.8/",
		"http://[2606:4700::1111]/",
		"http://10.0.0.1/x",
		"http://127.0.0.1:80/",
		"http://[::ffff:127.0.0.1]/",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://[2002:a00:1::]/",
		"http://[fe80::1%25eth0]/",
		"http://169.254.169.254/latest/meta-data/",
		"http://internal.test/",
		"http://user:pass@example.com/",
		"http://@example.com/",
		"http:///x",
		"http:opaque",
		"//example.com/",
		"ftp://example.com/",
		"file:///etc/passwd",
		"gopher://example.com/",
		"http://example.com:0/",
		"http://example.com:99999/",
		"http://exa mple.com/",
		"http://example.com/%zz",
		"http://[::1",
		"http://0x7f.1/",
		"http://2130706433/",
		"",
		"\x00",
		"http://" + strings.Repeat("a", 3000),
	} {
		f.Add(seed)
	}

	// A resolver that never touches DNS: it blocks names containing
	// "internal" and lets everything else resolve to a public address.
	fetcher := New(&Options{Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
		if strings.Contains(host, "internal") {
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil
	}})

	f.Fuzz(func(t *testing.T, raw string) {
		err := fetcher.Check(context.Background(), raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason == 0 || e.Error() == "" {
				t.Fatalf("Check(%q) = %v (%T), want an *Error with a reason", raw, err, err)
			}
			return
		}
		if len(raw) > MaxURLLength {
			t.Fatalf("Check accepted a %d-byte url", len(raw))
		}
		u, perr := url.Parse(raw)
		if perr != nil {
			t.Fatalf("Check accepted %q, which does not parse: %v", raw, perr)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("Check accepted scheme %q in %q", u.Scheme, raw)
		}
		if u.Hostname() == "" {
			t.Fatalf("Check accepted %q without a host", raw)
		}
		if u.User != nil {
			t.Fatalf("Check accepted credentials in %q", raw)
		}
		if a, perr := netip.ParseAddr(u.Hostname()); perr == nil {
			if reason, blocked := Blocked(a); blocked {
				t.Fatalf("Check accepted %q, which is %s", raw, reason)
			}
		}
	})
}
