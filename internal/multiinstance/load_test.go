package multiinstance_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// TestEvery503UnderLoadHasAStoreCause runs three instances as processes on one
// PostgreSQL and one Redis and makes 8,000 paid calls over 64 accounts, at 64, then
// 256 calls at once, then 64 again. A call may be answered 503 only because a store
// failed it: each 503 the clients got is logged once by the instance that answered it,
// at ERROR, with the store and its error (no client cancels and no request has a
// deadline, so none may be logged as the request's end), and none was charged: in the
// end each account has used exactly as many credits as it had calls answered 200.
// Transport errors are failures too. The test counts; it times nothing.
func TestEvery503UnderLoadHasAStoreCause(t *testing.T) {
	testenv.SkipUnlessFull(t, "8,000 paid calls on instances run as processes")
	dsn := testenv.Var(t, testenv.Postgres)
	redisAddr := testenv.Var(t, testenv.Redis)
	schema := testenv.PostgresSchema(t, dsn)
	prefix := testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))
	const accounts, credits = 64, 1_000_000
	keys := make([]string, accounts)
	for i := range keys {
		keys[i] = auth.NewKeyValue()
	}
	common := append([]string{"-postgres", dsn, "-schema", schema, "-redis", redisAddr, "-prefix", prefix, "-limits", "redis"}, processTimings...)
	procs := []*process{startProcess(t, append(common, "-fixtures", accountsFixtures(t, keys, credits))...)}
	for range 2 {
		procs = append(procs, startProcess(t, append(common, "-fixtures", fixtures(t, "", 0, ""))...))
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var (
		served       [accounts]atomic.Int64 // calls answered 200, per account
		unavailable  atomic.Int64
		transportErr atomic.Int64
	)
	var calls int
	for _, round := range []struct{ calls, clients int }{{2000, 64}, {4000, 256}, {2000, 64}} {
		calls += round.calls
		var next atomic.Int64
		var wg sync.WaitGroup
		for range round.clients {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < round.calls; i = int(next.Add(1)) - 1 {
					p, account := procs[i%len(procs)], (i/len(procs))%accounts
					req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+"/v1/hash?text=x", nil)
					if err != nil {
						t.Error(err)
						return
					}
					req.Header.Set("X-Api-Key", keys[account])
					resp, err := client.Do(req)
					if err != nil {
						if transportErr.Add(1) <= 5 {
							t.Errorf("a call to %s: %v", p.url, err)
						}
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					switch {
					case resp.StatusCode == http.StatusOK:
						served[account].Add(1)
					case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("X-Error-Code") == "unavailable" &&
						(resp.Header.Get("X-Credits-Cost") == "" || resp.Header.Get("X-Credits-Cost") == "0"):
						unavailable.Add(1)
					default:
						t.Errorf("a call to %s: %s %s %s", p.url, resp.Status, resp.Header.Get("X-Credits-Cost"), body)
					}
				}
			})
		}
		wg.Wait()
	}

	// Every 503 is in a log, at ERROR, with the store that failed and its error.
	var logged int64
	for _, p := range procs {
		for _, line := range strings.Split(p.logs.String(), "\n") {
			if !strings.Contains(line, "answered 503") {
				continue
			}
			if logged++; logged <= 10 {
				t.Logf("a 503 logged: %s", line)
			}
			if !storeCause.MatchString(line) {
				t.Errorf("a 503 without a store's failure for its cause: %s", line)
			}
		}
	}
	var total int64
	for i := range served {
		total += served[i].Load()
	}
	t.Logf("%d calls: %d answered 200, %d answered 503, %d transport errors; %d 503s logged", calls, total, unavailable.Load(), transportErr.Load(), logged)
	if logged != unavailable.Load() {
		t.Errorf("the clients got %d 503s; the instances logged %d", unavailable.Load(), logged)
	}

	// No 503 was charged: once the reservations of calls whose settlement was deferred
	// are settled or expired, each account has used one credit per call served.
	for i, key := range keys {
		want := served[i].Load()
		waitPosition(t, procs[i%len(procs)].url, key, time.Minute, func(p position) bool {
			return p.used == want && p.remaining == credits-want && p.inUse == 0
		})
	}
}

// storeCause matches a log line of an instance that answered 503 because a store
// failed while the request was live.
var storeCause = regexp.MustCompile(`level=ERROR msg="tollgate: answered 503: store unavailable" store=\S+ error=.+`)

// accountsFixtures writes a fixtures file with the plan "busy" and one account on it
// per key, load-0, load-1, ..., each with the given balance. It returns the file's
// path.
func accountsFixtures(t *testing.T, keys []string, credits int64) string {
	t.Helper()
	var accounts []any
	for i, key := range keys {
		accounts = append(accounts, map[string]any{"id": fmt.Sprintf("load-%d", i), "plan": "busy", "credits": credits,
			"keys": []any{map[string]any{"name": "primary", "value": key, "primary": true}}})
	}
	return writeFixtures(t, map[string]any{
		"plans":    []any{map[string]any{"name": "busy", "credits": 1_000_000, "concurrency": 1000}},
		"accounts": accounts,
	})
}
