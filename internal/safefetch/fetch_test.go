package safefetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// allowLoopback1 is a test policy: 127.0.0.1 is allowed, so httptest servers
// can stand in for public hosts, and everything else is judged by Blocked, so
// 127.0.0.2 stands in for an internal host.
func allowLoopback1(a netip.Addr) (string, bool) {
	if a.Unmap() == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		return "", false
	}
	return Blocked(a)
}

// fakeDNS returns a resolver hook that answers from names. A name that is
// not in the map does not exist, except "broken.test", whose lookup fails.
func fakeDNS(names map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if host == "broken.test" {
			return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
		}
		list, ok := names[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		addrs := make([]netip.Addr, len(list))
		for i, s := range list {
			addrs[i] = netip.MustParseAddr(s)
		}
		return addrs, nil
	}
}

// testFetcher returns a Fetcher whose policy and resolver default to
// allowLoopback1 and a resolver that knows no names, so no test touches DNS.
func testFetcher(o Options) *Fetcher {
	if o.blocked == nil {
		o.blocked = allowLoopback1
	}
	if o.Resolve == nil {
		o.Resolve = fakeDNS(nil)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return New(&o)
}

// serve starts an HTTP server on addr ("127.0.0.1:0", "127.0.0.2:0"), and
// skips the test if that address cannot be listened on.
func serve(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// wantReason fails the test unless err is an *Error with reason want, and
// checks the properties every message must have.
func wantReason(t *testing.T, err error, want Reason) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *Error with reason %v", err, err, want)
	}
	if e.Reason != want {
		t.Fatalf("reason = %v, want %v; error: %v", e.Reason, want, err)
	}
	msg := e.Error()
	if msg == "" || strings.HasSuffix(msg, ".") || msg != strings.ToLower(msg[:1])+msg[1:] {
		t.Errorf("message %q must be non-empty, start lowercase and have no trailing period", msg)
	}
	return e
}

// testMux serves the paths the fetch tests use.
func testMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/files/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "hello")
	})
	mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.UserAgent())
	})
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write([]byte(strings.Repeat("x", n)))
	})
	mux.HandleFunc("/chunked/{n}", func(w http.ResponseWriter, r *http.Request) {
		// Flushing before the handler returns makes the server send the body
		// chunked, without a Content-Length.
		n, _ := strconv.Atoi(r.PathValue("n"))
		for range n {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
		fmt.Fprint(w, "secret-body")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/r/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n > 0 {
			http.Redirect(w, r, "/r/"+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		fmt.Fprint(w, "done")
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("loc"))
		w.WriteHeader(http.StatusFound)
	})
	return mux
}

func redirectTo(base, loc string) string {
	return base + "/to?loc=" + url.QueryEscape(loc)
}

func TestFetch(t *testing.T) {
	srv := serve(t, "127.0.0.1:0", testMux())
	base := srv.URL
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name     string
		opts     Options
		url      string
		maxBytes int64
		want     Reason // zero means success
		check    func(t *testing.T, f *File, e *Error)
	}{
		{
			name: "success",
			url:  base + "/files/report%20v1.pdf",
			check: func(t *testing.T, f *File, _ *Error) {
				if string(f.Data) != "hello" || f.ContentType != "text/plain; charset=utf-8" ||
					f.Name != "report_v1.pdf" || f.URL != base+"/files/report%20v1.pdf" {
					t.Errorf("file = %+v", f)
				}
			},
		},
		{
			name: "default user agent",
			url:  base + "/ua",
			check: func(t *testing.T, f *File, _ *Error) {
				if string(f.Data) != DefaultUserAgent {
					t.Errorf("user agent = %q, want %q", f.Data, DefaultUserAgent)
				}
			},
		},
		{
			name: "custom user agent",
			opts: Options{UserAgent: "custom/2"},
			url:  base + "/ua",
			check: func(t *testing.T, f *File, _ *Error) {
				if string(f.Data) != "custom/2" {
					t.Errorf("user agent = %q, want custom/2", f.Data)
				}
			},
		},
		{
			name:     "exactly at the cap",
			url:      base + "/bytes/50",
			maxBytes: 50,
			check: func(t *testing.T, f *File, _ *Error) {
				if len(f.Data) != 50 {
					t.Errorf("len(Data) = %d, want 50", len(f.Data))
				}
			},
		},
		{
			name:     "chunked exactly at the cap",
			url:      base + "/chunked/50",
			maxBytes: 50,
			check: func(t *testing.T, f *File, _ *Error) {
				if len(f.Data) != 50 {
					t.Errorf("len(Data) = %d, want 50", len(f.Data))
				}
			},
		},
		{
			name:     "over the cap by content-length",
			url:      base + "/bytes/100",
			maxBytes: 50,
			want:     ReasonTooLarge,
			check: func(t *testing.T, _ *File, e *Error) {
				if !strings.Contains(e.Error(), "100 bytes") || !strings.Contains(e.Error(), "50 bytes") {
					t.Errorf("message %q should give the size and the limit", e)
				}
			},
		},
		{
			name:     "over the cap while streaming",
			url:      base + "/chunked/100",
			maxBytes: 50,
			want:     ReasonTooLarge,
		},
		{
			name: "default cap from options",
			opts: Options{MaxBytes: 10},
			url:  base + "/bytes/11",
			want: ReasonTooLarge,
		},
		{
			name: "not found",
			url:  base + "/status/404",
			want: ReasonStatus,
			check: func(t *testing.T, _ *File, e *Error) {
				if e.StatusCode != 404 || !strings.Contains(e.Error(), "404 Not Found") || strings.Contains(e.Error(), "secret-body") {
					t.Errorf("StatusCode = %d, message %q", e.StatusCode, e)
				}
			},
		},
		{
			name: "server error",
			url:  base + "/status/503",
			want: ReasonStatus,
			check: func(t *testing.T, _ *File, e *Error) {
				if e.StatusCode != 503 || strings.Contains(e.Error(), "secret-body") {
					t.Errorf("StatusCode = %d, message %q", e.StatusCode, e)
				}
			},
		},
		{
			name: "no content is still a success",
			url:  base + "/status/204",
		},
		{
			name: "timeout",
			opts: Options{Timeout: 50 * time.Millisecond},
			url:  base + "/slow",
			want: ReasonTimeout,
		},
		{
			name: "three redirects",
			url:  base + "/r/3",
			check: func(t *testing.T, f *File, _ *Error) {
				if string(f.Data) != "done" || f.URL != base+"/r/0" || f.Name != "0" {
					t.Errorf("file = %+v", f)
				}
			},
		},
		{
			name: "four redirects",
			url:  base + "/r/4",
			want: ReasonTooManyRedirects,
			check: func(t *testing.T, _ *File, e *Error) {
				want := fmt.Sprintf("url %q: the server redirected more than 3 times; use the final url of the file", base+"/r/4")
				if e.Error() != want {
					t.Errorf("message = %q, want %q", e, want)
				}
			},
		},
		{
			name: "one redirect allowed",
			opts: Options{MaxRedirects: 1},
			url:  base + "/r/1",
		},
		{
			name: "two redirects, one allowed",
			opts: Options{MaxRedirects: 1},
			url:  base + "/r/2",
			want: ReasonTooManyRedirects,
		},
		{
			name: "redirects disabled",
			opts: Options{MaxRedirects: -1},
			url:  base + "/r/1",
			want: ReasonTooManyRedirects,
		},
		{
			name: "status after redirect",
			url:  redirectTo(base, "/status/404"),
			want: ReasonStatus,
			check: func(t *testing.T, _ *File, e *Error) {
				if !strings.Contains(e.Error(), `redirected to "`+base+`/status/404"`) {
					t.Errorf("message %q should name the redirect target", e)
				}
			},
		},
		{
			name: "redirect to ftp",
			url:  redirectTo(base, "ftp://example.com/file"),
			want: ReasonScheme,
			check: func(t *testing.T, _ *File, e *Error) {
				if !strings.Contains(e.Error(), `redirected to "ftp://example.com/file"`) {
					t.Errorf("message %q should name the redirect target", e)
				}
			},
		},
		{
			name: "redirect to file",
			url:  redirectTo(base, "file:///etc/passwd"),
			want: ReasonScheme,
		},
		{
			name: "redirect to gopher",
			url:  redirectTo(base, "gopher://127.0.0.1:70/"),
			want: ReasonScheme,
		},
		{
			name: "redirect with credentials",
			url:  redirectTo(base, "http://user:secret@127.0.0.1:"+strconv.Itoa(port)+"/files/x"),
			want: ReasonBadURL,
			check: func(t *testing.T, _ *File, e *Error) {
				if !strings.Contains(e.Error(), `redirected to "http://xxxxx@127.0.0.1:`) {
					t.Errorf("message %q should name the target with its credentials masked", e)
				}
			},
		},
		{
			name: "redirect to a name resolving to a blocked address",
			opts: Options{Resolve: fakeDNS(map[string][]string{"internal.test": {"127.0.0.2"}})},
			url:  redirectTo(base, "http://internal.test:"+strconv.Itoa(port)+"/files/x"),
			want: ReasonBlocked,
			check: func(t *testing.T, _ *File, e *Error) {
				if !strings.Contains(e.Error(), `redirected to "http://internal.test:`) || strings.Contains(e.Error(), "127.0.0.2") {
					t.Errorf("message %q should name the target but not the address", e)
				}
			},
		},
		{
			name: "redirect to metadata",
			url:  redirectTo(base, "http://169.254.169.254/latest/meta-data/"),
			want: ReasonBlocked,
			check: func(t *testing.T, _ *File, e *Error) {
				if !strings.Contains(e.Error(), "169.254.169.254 is a cloud metadata address") {
					t.Errorf("message %q", e)
				}
			},
		},
		{
			name: "default policy blocks loopback",
			opts: Options{blocked: Blocked},
			url:  base + "/files/x",
			want: ReasonBlocked,
			check: func(t *testing.T, _ *File, e *Error) {
				want := fmt.Sprintf("url %q: 127.0.0.1 is a loopback address; only public internet addresses can be fetched", base+"/files/x")
				if e.Error() != want {
					t.Errorf("message = %q, want %q", e, want)
				}
			},
		},
		{
			name: "allow private lets loopback through",
			opts: Options{blocked: Blocked, AllowPrivate: true},
			url:  base + "/files/x",
		},
		{
			name: "bad url is refused before connecting",
			url:  "gopher://127.0.0.1/",
			want: ReasonScheme,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFetcher(tt.opts)
			file, err := f.Fetch(context.Background(), tt.url, tt.maxBytes)
			var e *Error
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
			} else {
				if file != nil {
					t.Errorf("Fetch returned a file and error %v", err)
				}
				e = wantReason(t, err, tt.want)
			}
			if tt.check != nil {
				tt.check(t, file, e)
			}
		})
	}
}

// TestFetchRedirectToBlocked redirects from an allowed server to one on a
// blocked address and checks that the second server is never reached.
func TestFetchRedirectToBlocked(t *testing.T) {
	var hits atomic.Int32
	internal := serve(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	public := serve(t, "127.0.0.1:0", testMux())

	// Sanity check: the internal server works when the policy is off.
	if _, err := testFetcher(Options{AllowPrivate: true}).Fetch(context.Background(), internal.URL, 0); err != nil {
		t.Fatalf("internal server unreachable with AllowPrivate: %v", err)
	}
	hits.Store(0)

	f := testFetcher(Options{})
	_, err := f.Fetch(context.Background(), redirectTo(public.URL, internal.URL+"/x"), 0)
	e := wantReason(t, err, ReasonBlocked)
	if !strings.Contains(e.Error(), "127.0.0.2 is a loopback address") || strings.Contains(e.Error(), "secret") {
		t.Errorf("message = %q", e)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("blocked server got %d requests", n)
	}
}

// TestDNSRebinding uses a resolver that answers 127.0.0.1 the first time and
// 127.0.0.2 afterwards: the pre-check passes, the dial is refused.
func TestDNSRebinding(t *testing.T) {
	var hits atomic.Int32
	srv := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	}))
	var lookups atomic.Int32
	f := testFetcher(Options{Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.test" {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
	}})
	u := "http://rebind.test:" + strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port) + "/file"

	if err := f.Check(context.Background(), u); err != nil {
		t.Fatalf("Check: %v", err)
	}
	_, err := f.Fetch(context.Background(), u, 0)
	e := wantReason(t, err, ReasonBlocked)
	want := fmt.Sprintf(`url %q: the host "rebind.test" %s`, u, refusedText)
	if e.Error() != want {
		t.Errorf("message = %q, want %q", e, want)
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("resolver called %d times, want 2", n)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server got %d requests", n)
	}
}

func TestFetchContext(t *testing.T) {
	srv := serve(t, "127.0.0.1:0", testMux())
	f := testFetcher(Options{})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Fetch(ctx, srv.URL+"/files/x", 0)
	wantReason(t, err, ReasonCanceled)

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = f.Fetch(ctx, srv.URL+"/slow", 0)
	wantReason(t, err, ReasonTimeout)
}

func TestFetchConnectionRefused(t *testing.T) {
	// Find a port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	_, err = testFetcher(Options{}).Fetch(context.Background(), "http://"+addr+"/x", 0)
	e := wantReason(t, err, ReasonNetwork)
	if !strings.Contains(e.Error(), "could not connect") {
		t.Errorf("message = %q", e)
	}
}

func TestFetchConcurrent(t *testing.T) {
	srv := serve(t, "127.0.0.1:0", testMux())
	f := testFetcher(Options{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			u := srv.URL + "/files/f" + strconv.Itoa(i)
			if i%4 == 0 {
				u = srv.URL + "/r/2"
			}
			if _, err := f.Fetch(context.Background(), u, 0); err != nil {
				t.Errorf("Fetch(%s): %v", u, err)
			}
			if err := f.Check(context.Background(), u); err != nil {
				t.Errorf("Check(%s): %v", u, err)
			}
		})
	}
	wg.Wait()
}

func TestCheck(t *testing.T) {
	dns := fakeDNS(map[string][]string{
		"public.test":   {"8.8.8.8", "2606:4700::1111"},
		"PUBLIC.test":   {"8.8.8.8"},
		"internal.test": {"10.0.0.1"},
		"metadata.test": {"169.254.169.254"},
		"mixed.test":    {"8.8.8.8", "10.0.0.1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"nat64.test":    {"64:ff9b::a00:1"},
		"localhost":     {"127.0.0.1", "::1"},
		"empty.test":    {},
	})
	tests := []struct {
		url     string
		want    Reason // zero means success
		msg     string // if set, the exact message
		contain string // if set, a part of the message
	}{
		// Allowed.
		{url: "https://public.test/file.pdf"},
		{url: "http://public.test"},
		{url: "HTTPS://PUBLIC.test/x"},
		{url: "http://8.8.8.8/"},
		{url: "http://[2606:4700::1111]:8080/x"},
		{url: "http://[::ffff:8.8.8.8]/"},
		{url: "https://public.test:443/a?b=c#d"},

		// Schemes.
		{url: "ftp://public.test/x", want: ReasonScheme, msg: `url "ftp://public.test/x": the scheme "ftp" is not supported; use http or https`},
		{url: "file:///etc/passwd", want: ReasonScheme},
		{url: "gopher://public.test/", want: ReasonScheme},
		{url: "javascript:alert(1)", want: ReasonScheme},
		{url: "//public.test/x", want: ReasonScheme, contain: "no scheme"},
		{url: "public.test/x", want: ReasonScheme},

		// Credentials.
		{url: "http://user:hunter2@public.test/", want: ReasonBadURL, contain: "user name or password"},
		{url: "http://token@public.test/", want: ReasonBadURL},
		{url: "http://:@public.test/", want: ReasonBadURL},

		// Missing host.
		{url: "http:///x", want: ReasonBadURL, contain: "no host"},
		{url: "http://:80/", want: ReasonBadURL},
		{url: "http:opaque", want: ReasonBadURL},
		{url: "https://", want: ReasonBadURL},
		{url: "", want: ReasonBadURL},

		// Unparseable, bad port, too long.
		{url: "http://public.test/%zz", want: ReasonBadURL, contain: "cannot be parsed"},
		{url: "http://[::1/", want: ReasonBadURL},
		{url: "http://pub lic.test/", want: ReasonBadURL},
		{url: "http://public.test\x00/", want: ReasonBadURL},
		{url: "http://public.test:0/", want: ReasonBadURL},
		{url: "http://public.test:70000/", want: ReasonBadURL},
		{url: "http://public.test/" + strings.Repeat("a", MaxURLLength), want: ReasonBadURL, contain: "over the limit of 2048 bytes"},

		// Blocked literals: the message says why, which the address says anyway.
		{url: "http://10.0.0.1/x", want: ReasonBlocked, msg: `url "http://10.0.0.1/x": 10.0.0.1 is a private address; only public internet addresses can be fetched`},
		{url: "http://127.0.0.1:8080/", want: ReasonBlocked, contain: "loopback"},
		{url: "http://[::1]/", want: ReasonBlocked, contain: "::1 is a loopback address"},
		{url: "http://[::ffff:10.0.0.1]/", want: ReasonBlocked, contain: "private"},
		{url: "http://[64:ff9b::7f00:1]/", want: ReasonBlocked, contain: "loopback"},
		{url: "http://[2002:a9fe:a9fe::]/", want: ReasonBlocked, contain: "cloud metadata"},
		{url: "http://169.254.169.254/latest/meta-data/", want: ReasonBlocked, contain: "169.254.169.254 is a cloud metadata address"},
		{url: "http://[fd00:ec2::254]/", want: ReasonBlocked, contain: "cloud metadata"},
		{url: "http://100.100.100.200/", want: ReasonBlocked, contain: "cloud metadata"},
		{url: "http://0.0.0.0/", want: ReasonBlocked, contain: "unspecified"},
		{url: "http://[fe80::1%25eth0]/", want: ReasonBlocked, contain: "link-local"},
		// Host names resolving to blocked addresses, and hosts that cannot be
		// resolved: one message for all (see TestRefusedDestinationsLookAlike).
		{url: "http://internal.test/x", want: ReasonBlocked, msg: `url "http://internal.test/x": the host "internal.test" ` + refusedText},
		{url: "http://metadata.test/", want: ReasonBlocked, contain: refusedText},
		{url: "http://mixed.test/", want: ReasonBlocked, contain: refusedText},
		{url: "http://mapped.test/", want: ReasonBlocked, contain: refusedText},
		{url: "http://nat64.test/", want: ReasonBlocked, contain: refusedText},
		{url: "http://localhost:8080/", want: ReasonBlocked, contain: refusedText},
		{url: "http://missing.test/", want: ReasonNetwork, msg: `url "http://missing.test/": the host "missing.test" ` + refusedText},
		{url: "http://empty.test/", want: ReasonNetwork, contain: refusedText},
		{url: "http://broken.test/", want: ReasonNetwork, contain: refusedText},
	}
	f := testFetcher(Options{blocked: Blocked, Resolve: dns})
	for _, tt := range tests {
		err := f.Check(context.Background(), tt.url)
		if tt.want == 0 {
			if err != nil {
				t.Errorf("Check(%q) = %v, want nil", tt.url, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason != tt.want {
			t.Errorf("Check(%q) = %v, want reason %v", tt.url, err, tt.want)
			continue
		}
		msg := e.Error()
		if tt.msg != "" && msg != tt.msg {
			t.Errorf("Check(%q) message\n got %q\nwant %q", tt.url, msg, tt.msg)
		}
		if !strings.Contains(msg, tt.contain) {
			t.Errorf("Check(%q) message %q does not contain %q", tt.url, msg, tt.contain)
		}
		if strings.HasSuffix(msg, ".") || strings.Contains(msg, "hunter2") || strings.Contains(msg, "10.0.0.1") && !strings.Contains(tt.url, "10.0.0.1") {
			t.Errorf("Check(%q) message %q has a trailing period or leaks a password or address", tt.url, msg)
		}
		if len(msg) > 2*maxDisplayURL+200 {
			t.Errorf("Check(%q) message is %d bytes long", tt.url, len(msg))
		}
	}

	t.Run("allow private", func(t *testing.T) {
		f := testFetcher(Options{blocked: Blocked, Resolve: dns, AllowPrivate: true})
		for _, u := range []string{"http://10.0.0.1/", "http://internal.test/", "http://[::1]:8080/"} {
			if err := f.Check(context.Background(), u); err != nil {
				t.Errorf("Check(%q) = %v, want nil", u, err)
			}
		}
		// URL validation and resolution still apply.
		wantReason(t, f.Check(context.Background(), "ftp://10.0.0.1/"), ReasonScheme)
		wantReason(t, f.Check(context.Background(), "http://missing.test/"), ReasonNetwork)
	})

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantReason(t, f.Check(ctx, "http://public.test/"), ReasonCanceled)
	})
}

func TestControl(t *testing.T) {
	f := testFetcher(Options{})
	tests := []struct {
		address string
		ok      bool
	}{
		{"127.0.0.1:80", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"127.0.0.2:80", false},
		{"10.0.0.1:443", false},
		{"[::1]:80", false},
		{"[fe80::1%eth0]:80", false},
		{"localhost:80", false}, // not an address: cannot be checked, refused
		{"", false},
	}
	for _, tt := range tests {
		err := f.control("tcp", tt.address, nil)
		if tt.ok != (err == nil) {
			t.Errorf("control(%q) = %v, want ok=%v", tt.address, err, tt.ok)
		}
		if err != nil {
			// The address may be one a host name resolved to: it is not shown.
			if e := wantReason(t, err, ReasonBlocked); tt.address != "" && strings.Contains(e.Error(), tt.address) {
				t.Errorf("control(%q) = %q shows the address", tt.address, e)
			}
		}
	}
	if err := testFetcher(Options{AllowPrivate: true}).control("tcp", "10.0.0.1:80", nil); err != nil {
		t.Errorf("control with AllowPrivate = %v", err)
	}
}

func TestFileName(t *testing.T) {
	tests := []struct{ url, want string }{
		{"http://h/files/report.pdf", "report.pdf"},
		{"http://h/files/report%20v1.pdf", "report_v1.pdf"},
		{"http://h/a/b%2Fc.txt", "b_c.txt"},
		{"http://h/a/..%2F..%2Fetc%2Fpasswd", "_.._etc_passwd"},
		{"http://h/.hidden", "hidden"},
		{"http://h/..", ""},
		{"http://h/dir/", ""},
		{"http://h/", ""},
		{"http://h", ""},
		{"http://h/%E2%80%AEfdp.exe", "_fdp.exe"}, // right-to-left override
		{"http://h/caf%C3%A9.txt", "café.txt"},
		{"http://h/%FF.txt", "_.txt"},
		{"http://h/x?name=y.pdf", "x"},
		{"http://h/" + strings.Repeat("a", 300) + ".pdf", strings.Repeat("a", maxNameLen)},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := fileName(u); got != tt.want {
			t.Errorf("fileName(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestError(t *testing.T) {
	err := fmt.Errorf("download: %w", testFetcher(Options{}).Check(context.Background(), "ftp://x/"))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonScheme || e.URL != "ftp://x/" {
		t.Fatalf("errors.As through wrapping: %v, %+v", err, e)
	}
	if got := ReasonTooManyRedirects.String(); got != "too many redirects" {
		t.Errorf("String() = %q", got)
	}
	if got := Reason(99).String(); got != "reason(99)" {
		t.Errorf("String() = %q", got)
	}
	if got := displayURL("http://u:p@h/" + strings.Repeat("é", 200)); strings.Contains(got, "u:p") ||
		!strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "http://xxxxx@h/") {
		t.Errorf("displayURL = %q", got)
	}
}

func TestNewDefaults(t *testing.T) {
	f := New(nil)
	if f.maxRedirects != DefaultMaxRedirects || f.timeout != DefaultTimeout || f.maxBytes != DefaultMaxBytes ||
		f.userAgent != DefaultUserAgent || f.allowPrivate {
		t.Errorf("New(nil) = %+v", f)
	}
	tr := f.client.Transport.(*http.Transport)
	if tr.Proxy != nil {
		t.Error("the transport uses a proxy")
	}
}
