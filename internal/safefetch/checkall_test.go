package safefetch

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// countingDNS wraps a resolver hook and counts its lookups of each host.
type countingDNS struct {
	mu      sync.Mutex
	lookups map[string]int
	next    func(context.Context, string) ([]netip.Addr, error)
}

func newCountingDNS(next func(context.Context, string) ([]netip.Addr, error)) *countingDNS {
	return &countingDNS{lookups: make(map[string]int), next: next}
}

func (c *countingDNS) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	c.mu.Lock()
	c.lookups[host]++
	c.mu.Unlock()
	return c.next(ctx, host)
}

// counts returns a copy of the lookups made so far.
func (c *countingDNS) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.lookups)
}

// sameError fails the test unless got is the error want is: both nil, or
// *Errors of the same reason, URL, status and message.
func sameError(t *testing.T, url string, got, want error) {
	t.Helper()
	if want == nil || got == nil {
		if got != want {
			t.Errorf("%s: CheckAll gave %v, Check %v", url, got, want)
		}
		return
	}
	var g, w *Error
	if !errors.As(got, &g) || !errors.As(want, &w) {
		t.Fatalf("%s: CheckAll gave %T, Check %T; want *Error from both", url, got, want)
	}
	if g.Reason != w.Reason || g.URL != w.URL || g.StatusCode != w.StatusCode || g.Error() != w.Error() {
		t.Errorf("%s: CheckAll gave %v %q, Check %v %q", url, g.Reason, g, w.Reason, w)
	}
}

// TestCheckAllAsCheck checks that CheckAll gives each URL the error Check gives it, in
// the URLs' order, with each distinct host resolved (and refused in the log) once.
func TestCheckAllAsCheck(t *testing.T) {
	dns := fakeDNS(map[string][]string{
		"public.test":   {"8.8.8.8"},
		"PUBLIC.test":   {"8.8.8.8"},
		"internal.test": {"10.0.0.1"},
		"empty.test":    {},
	})
	urls := []string{
		"https://public.test/a.png",
		"http://internal.test/a",
		"https://public.test/b.png",
		"HTTPS://PUBLIC.test/c",
		"http://missing.test/a",
		"http://internal.test/b",
		"http://broken.test/a",
		"http://empty.test/a",
		"http://10.0.0.1/a",
		"http://10.0.0.1/b",
		"http://8.8.8.8/a",
		"ftp://public.test/a",
		"http://user:hunter2@public.test/a",
		"",
		"http://public.test/%zz",
		"http://missing.test/b",
		"https://public.test/" + strings.Repeat("a", MaxURLLength),
	}
	var logs testenv.Logs
	counter := newCountingDNS(dns)
	all := testFetcher(Options{blocked: Blocked, Resolve: counter.resolve, Logger: logs.Logger()}).CheckAll(t.Context(), urls)
	if len(all) != len(urls) {
		t.Fatalf("%d errors for %d urls", len(all), len(urls))
	}
	one := testFetcher(Options{blocked: Blocked, Resolve: dns})
	for i, u := range urls {
		sameError(t, u, all[i], one.Check(t.Context(), u))
	}
	want := map[string]int{"public.test": 1, "PUBLIC.test": 1, "internal.test": 1, "missing.test": 1, "broken.test": 1, "empty.test": 1}
	if got := counter.counts(); !maps.Equal(got, want) {
		t.Errorf("lookups %v, want each host once and no literal: %v", got, want)
	}
	// One refusal logged per host (internal, missing, broken, empty) and per
	// blocked literal, not one per URL.
	if records := logs.Records(t); len(records) != 5 {
		t.Errorf("%d log records, want 5, one per refused host: %+v", len(records), records)
	}
	if got := testFetcher(Options{}).CheckAll(t.Context(), nil); len(got) != 0 {
		t.Errorf("CheckAll(nil) = %v, want no errors", got)
	}
}

// TestCheckAllParallel checks that CheckAll resolves LookupParallelism hosts at once,
// and never more: each lookup waits until that many are in flight, which serial
// lookups would never reach (they would all end at the timeout instead).
func TestCheckAllParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			inFlight int
			most     int
			ready    = make(chan struct{})
			open     sync.Once
		)
		resolve := func(ctx context.Context, host string) ([]netip.Addr, error) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			if inFlight == LookupParallelism {
				open.Do(func() { close(ready) })
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight--
				mu.Unlock()
			}()
			select {
			case <-ready:
				return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var urls []string
		for i := range 3 * LookupParallelism {
			urls = append(urls, "http://h"+strconv.Itoa(i)+".test/x")
		}
		start := time.Now()
		for i, err := range testFetcher(Options{Resolve: resolve}).CheckAll(t.Context(), urls) {
			if err != nil {
				t.Errorf("%s: %v, want nil: the lookups should run %d at a time", urls[i], err, LookupParallelism)
			}
		}
		if most != LookupParallelism {
			t.Errorf("at most %d lookups at once, want %d", most, LookupParallelism)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("took %v of fake time, want none", took)
		}
	})
}

// TestCheckAllTimeout checks that hosts whose lookups do not answer hold CheckAll for
// one timeout in all, however many URLs and hosts there are and whether or not the
// resolver heeds its context: their URLs fail with a timeout error that says what to
// do, hosts that answered pass, and hosts that never got a lookup time out too.
func TestCheckAllTimeout(t *testing.T) {
	for _, heedsContext := range []bool{true, false} {
		name := "resolver ignores its context"
		if heedsContext {
			name = "resolver heeds its context"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				never := make(chan struct{})
				defer close(never) // lets a resolver that ignores its context end
				public := fakeDNS(map[string][]string{"public.test": {"8.8.8.8"}, "internal.test": {"10.0.0.1"}})
				counter := newCountingDNS(func(ctx context.Context, host string) ([]netip.Addr, error) {
					if !strings.HasPrefix(host, "hang") {
						return public(ctx, host)
					}
					if heedsContext {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					<-never
					return nil, errors.New("too late")
				})
				f := testFetcher(Options{blocked: Blocked, Resolve: counter.resolve, Timeout: 5 * time.Second})
				// public.test and internal.test come first and are resolved; the
				// LookupParallelism+2 hanging hosts take every lookup, so that
				// late.test, after them, never gets one.
				urls := []string{"http://public.test/0", "http://internal.test/0", "http://hang0.test/a", "http://hang0.test/b", "http://8.8.8.8/0"}
				for i := range LookupParallelism + 2 {
					urls = append(urls, "http://hang"+strconv.Itoa(i)+".test/x")
				}
				urls = append(urls, "http://late.test/0", "http://public.test/1", "ftp://hang0.test/")
				start := time.Now()
				errs := f.CheckAll(t.Context(), urls)
				if took := time.Since(start); took != 5*time.Second {
					t.Errorf("CheckAll took %v of fake time, want one timeout, 5s", took)
				}
				for i, u := range urls {
					switch host := u[strings.Index(u, "//")+2 : strings.LastIndexByte(u, '/')]; {
					case u == "ftp://hang0.test/":
						wantReason(t, errs[i], ReasonScheme)
					case host == "public.test" || host == "8.8.8.8":
						if errs[i] != nil {
							t.Errorf("%s: %v, want nil", u, errs[i])
						}
					case host == "internal.test":
						wantReason(t, errs[i], ReasonBlocked)
					default:
						e := wantReason(t, errs[i], ReasonTimeout)
						want := `url "` + u + `": the host "` + host + `" could not be resolved within 5s; try again later, or use a url on a host whose name resolves promptly`
						if e.Error() != want {
							t.Errorf("%s:\n got %q\nwant %q", u, e, want)
						}
					}
				}
				if got := counter.counts(); got["hang0.test"] != 1 || got["late.test"] != 0 || len(got) != LookupParallelism+2 {
					t.Errorf("lookups %v: want hang0.test once, late.test never, %d hosts in all", got, LookupParallelism+2)
				}
			})
		})
	}
}

// TestCheckAllContext checks CheckAll under a canceled context, one canceled while
// lookups hang, and one whose deadline comes before the Fetcher's timeout: the hosts
// not resolved fail with the context's reason, the rest as they would anyway.
func TestCheckAllContext(t *testing.T) {
	hang := func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "public.test" {
			return []netip.Addr{netip.MustParseAddr("8.8.8.8")}, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	urls := []string{"http://hang.test/a", "http://8.8.8.8/", "http://10.0.0.1/", "ftp://hang.test/", "http://hang.test/b"}
	wants := []Reason{0, 0, ReasonBlocked, ReasonScheme, 0}
	tests := []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		want  Reason // for the hanging host
		msg   string
		after time.Duration // when CheckAll returns, in fake time
	}{
		{"canceled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, ReasonCanceled, "the fetch was canceled", 0},
		{"canceled while resolving", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, ReasonCanceled, "the fetch was canceled", time.Second},
		{"caller's deadline first", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 2*time.Second)
		}, ReasonTimeout, "the fetch ran out of time; try again or use a faster server", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := tt.ctx()
				defer cancel()
				start := time.Now()
				errs := testFetcher(Options{blocked: Blocked, Resolve: hang}).CheckAll(ctx, urls)
				if took := time.Since(start); took != tt.after {
					t.Errorf("CheckAll took %v of fake time, want %v", took, tt.after)
				}
				for i, u := range urls {
					want := wants[i]
					if strings.Contains(u, "http://hang.test") {
						want = tt.want
					}
					if want == 0 {
						if errs[i] != nil {
							t.Errorf("%s: %v, want nil", u, errs[i])
						}
						continue
					}
					e := wantReason(t, errs[i], want)
					if want == tt.want && e.Error() != `url "`+u+`": `+tt.msg {
						t.Errorf("%s: %q, want the message %q", u, e, tt.msg)
					}
				}
			})
		})
	}
}
