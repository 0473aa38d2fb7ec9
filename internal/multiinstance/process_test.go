package multiinstance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/idempotency"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// The tests of this file run the deployment as separate processes, examples/distributed
// with one instance each, so that an instance can die the way a crashed one does: by
// SIGKILL, in the middle of its calls, with nothing written on its way out.

// binaries holds examples/distributed, built once per run of the package's tests.
var binaries struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// distributedBinary returns the path of examples/distributed, built for this run.
func distributedBinary(t *testing.T) string {
	t.Helper()
	binaries.once.Do(func() {
		binaries.dir, binaries.err = os.MkdirTemp("", "tollgate-distributed-")
		if binaries.err != nil {
			return
		}
		binaries.path = filepath.Join(binaries.dir, "distributed")
		out, err := exec.Command("go", "build", "-o", binaries.path, "github.com/tollgate-dev/tollgate/examples/distributed").CombinedOutput()
		if err != nil {
			binaries.err = fmt.Errorf("go build ./examples/distributed: %v\n%s", err, out)
		}
	})
	if binaries.err != nil {
		t.Fatal(binaries.err)
	}
	return binaries.path
}

// A process is one instance of examples/distributed.
type process struct {
	cmd  *exec.Cmd
	url  string
	logs *lockedBuffer
	done chan struct{}
}

// lockedBuffer is the standard error of a process, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess starts an instance with args and waits until it listens. It is killed
// when the test ends, if it still runs.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(distributedBinary(t), append([]string{"-instances", "1", "-port", "0"}, args...)...)
	p := &process{cmd: cmd, logs: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("instance %s logged:\n%s", p.url, p.logs.String())
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
				urls <- url
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case p.url = <-urls:
	case <-p.done:
		t.Fatalf("the instance exited before it listened:\n%s", p.logs.String())
	case <-time.After(time.Minute):
		t.Fatalf("the instance does not listen after a minute:\n%s", p.logs.String())
	}
	return p
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *process) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// fixtures writes a fixtures file with the plan "busy" (a million credits, no rate
// limit, 1000 calls at once), and, if account is not empty, that account with the
// given balance and key value. It returns the file's path.
func fixtures(t *testing.T, account string, credits int64, key string) string {
	t.Helper()
	return fixturesOn(t, 1000, account, credits, key)
}

// fixturesOn is fixtures with a plan "busy" that allows concurrency calls at once.
func fixturesOn(t *testing.T, concurrency int, account string, credits int64, key string) string {
	t.Helper()
	return fixturesWith(t, 1_000_000, concurrency, account, credits, key)
}

// fixturesWith is fixturesOn with a plan "busy" whose allowance is allowance credits a
// period: an account's balance above it is a grant that never lapses.
func fixturesWith(t *testing.T, allowance int64, concurrency int, account string, credits int64, key string) string {
	t.Helper()
	f := map[string]any{"plans": []any{map[string]any{"name": "busy", "credits": allowance, "concurrency": concurrency}}}
	if account != "" {
		f["accounts"] = []any{map[string]any{"id": account, "plan": "busy", "credits": credits,
			"keys": []any{map[string]any{"name": "primary", "value": key, "primary": true}}}}
	}
	return writeFixtures(t, f)
}

// writeFixtures writes f as a fixtures file and returns its path.
func writeFixtures(t *testing.T, f map[string]any) string {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fixtures.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// position is what /v1/analytics reports of an account.
type position struct {
	remaining, used int64
	inUse           int
}

// analytics reads the account's position through instance url; the balance it reads
// has the account's expired reservations voided.
func analytics(ctx context.Context, url, key string) (position, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/analytics", nil)
	if err != nil {
		return position{}, err
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return position{}, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Credits struct {
				Remaining int64 `json:"remaining"`
				Used      int64 `json:"used"`
			} `json:"credits"`
			Concurrency struct {
				InUse int `json:"in_use"`
			} `json:"concurrency"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return position{}, fmt.Errorf("analytics: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return position{}, err
	}
	return position{body.Data.Credits.Remaining, body.Data.Credits.Used, body.Data.Concurrency.InUse}, nil
}

// waitPosition polls the account's position through url until ok accepts it, and
// returns it and how long that took; it fails the test after limit.
func waitPosition(t *testing.T, url, key string, limit time.Duration, ok func(position) bool) (position, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var last position
	var lastErr error
	err := testenv.Wait(ctx, func() error {
		p, err := analytics(ctx, url, key)
		if err != nil {
			lastErr = err
			return err
		}
		last = p
		if !ok(p) {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after %v the position is %+v (last error %v)", limit, last, lastErr)
	}
	return last, time.Since(start)
}

// slowCall makes a call of echo that runs for delay through url, and returns the
// status and the credits it was charged (X-Credits-Cost), or the error of a call whose
// instance died or whose context ended.
func slowCall(ctx context.Context, url, key string, delay time.Duration) (int, int64, error) {
	body := fmt.Sprintf(`{"message":"slow","delay_ms":%d}`, delay.Milliseconds())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/echo", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	cost, _ := strconv.ParseInt(resp.Header.Get("X-Credits-Cost"), 10, 64)
	return resp.StatusCode, cost, nil
}

// ledgerKinds counts the ledger entries of an account by kind.
func ledgerKinds(t *testing.T, dsn, schema, account string) map[string]int {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT kind, count(*) FROM `+pgx.Identifier{schema, "tollgate_ledger"}.Sanitize()+
		` WHERE account_id = $1 GROUP BY kind`, account)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		kinds[kind] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return kinds
}

// The timings of the processes: a call may run 6s, its reservation lives 2s more, a
// slot 4s without renewal, and every instance sweeps twice a second.
var processTimings = []string{"-call-timeout", "6s", "-reservation-grace", "2s", "-lease", "4s", "-sweep-interval", "500ms"}

// TestKilledInstance runs three instances as processes on one PostgreSQL and one Redis,
// puts 100 calls of five seconds in flight on one of them, and kills it with SIGKILL
// while calls keep being served by the others. Its clients get their connections
// reset; within the reservations' expiry every credit of its calls is back and every
// slot free, voided exactly once; and in the end the balance is the starting one less
// exactly what the answered calls were charged (the sum of X-Credits-Cost over the 200
// answers).
//
// It runs with the rate limits and slots in Redis and in PostgreSQL, and each way twice:
// with the whole balance in the plan's allowance, and with most of it in grants (an
// allowance of 50, a grant lapsing in a year and one that never lapses, see
// [grantedBalance]): then the calls in flight take from both parts, and in the end each
// part is exactly what it was less what the answered calls kept of it.
func TestKilledInstance(t *testing.T) {
	testenv.SkipUnlessFull(t, "instances as processes, one killed with kill -9")
	for _, tc := range []struct {
		limits string
		grants bool
		blocks bool
	}{{"redis", false, false}, {"postgres", false, false}, {"redis", true, false}, {"postgres", true, false},
		{"redis", false, true}, {"postgres", false, true}} {
		name := "limits=" + tc.limits
		if tc.grants {
			name += "/grants"
		}
		blockSize := "-1" // each call reserves its own credits: the ledger's entries are per call
		if tc.blocks {
			name += "/blocks"
			blockSize = "1000"
		}
		t.Run(name, func(t *testing.T) {
			dsn := testenv.Var(t, testenv.Postgres)
			redisAddr := testenv.Var(t, testenv.Redis)
			schema := testenv.PostgresSchema(t, dsn)
			prefix := testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))
			const account, credits, inFlight = "crash", 100_000, 100
			allowance := int64(1_000_000) // the whole balance is the period's allowance
			if tc.grants {
				allowance = killedAllowance // the rest of the balance is a grant that never lapses
			}
			key := auth.NewKeyValue()
			common := append([]string{"-postgres", dsn, "-schema", schema, "-redis", redisAddr, "-prefix", prefix,
				"-limits", tc.limits, "-admin-token", adminToken, "-credit-block-size", blockSize}, processTimings...)
			first := startProcess(t, append(common, "-fixtures", fixturesWith(t, allowance, 1000, account, credits, key))...)
			plans := fixturesWith(t, allowance, 1000, "", 0, key)
			second := startProcess(t, append(common, "-fixtures", plans)...)
			victim := startProcess(t, append(common, "-fixtures", plans)...)
			var granted *grantedBalance
			if tc.grants {
				granted = grantBalance(t, first.url, account, credits)
			}

			// The victim's slow calls: every one dies with the instance.
			var lost sync.WaitGroup
			for range inFlight {
				lost.Go(func() {
					if status, _, err := slowCall(t.Context(), victim.url, key, 5*time.Second); err == nil {
						t.Errorf("a call on the killed instance was answered %d", status)
					}
				})
			}
			waitPosition(t, first.url, key, 30*time.Second, func(p position) bool {
				// With blocks, the victim's block counts as used until it comes back.
				return p.inUse == inFlight && (p.used == inFlight || tc.blocks && p.used >= inFlight)
			})
			if granted != nil {
				granted.wantInFlight(t, inFlight)
			}

			// Calls served by the survivors from now on, their charges summed.
			var charged, served int64
			var mu sync.Mutex
			stop := make(chan struct{})
			var survivors sync.WaitGroup
			for w, p := range []*process{first, second, first, second} {
				survivors.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						status, cost, err := slowCall(t.Context(), p.url, key, time.Duration(w*i%3)*10*time.Millisecond)
						if err != nil || status != http.StatusOK {
							t.Errorf("a survivor's call: %d %v", status, err)
							return
						}
						mu.Lock()
						charged, served = charged+cost, served+1
						mu.Unlock()
					}
				})
			}

			victim.kill()
			killed := time.Now()
			lost.Wait()

			// The survivors' balance reads void what has expired; each must come back
			// within the reservations' life (6s + 2s from admission), plus a sweep. With
			// credit blocks, what another survivor's blocks hold reads as used until they
			// go back, so the survivors stop first and the final position decides.
			var p position
			var took time.Duration
			if tc.blocks {
				time.Sleep(3 * time.Second)
			} else {
				p, took = waitPosition(t, second.url, key, 30*time.Second, func(p position) bool {
					mu.Lock()
					defer mu.Unlock()
					return p.used <= charged+4 && p.inUse <= 4 // the survivors' calls in flight
				})
			}
			close(stop)
			survivors.Wait()
			// The wait above tolerates the survivors' calls in flight, so up to four of
			// the killed instance's reservations may still be open when it ends (on a
			// loaded machine its calls were admitted over some time, and expire over the
			// same). With the survivors stopped, the position must come to exactly what
			// they were charged, and no slot in use.
			// (With blocks: the victim's blocks expire within the reservations' life of
			// its last roll, and the survivors' within a second of their last call.)
			final, _ := waitPosition(t, first.url, key, 30*time.Second, func(p position) bool { return p.inUse == 0 && p.used == charged })
			// How soon is logged, not asserted (a loaded machine delays everything): the
			// polls above fail the test only if the credits never come back.
			t.Logf("killed with %d calls in flight; their credits were back %v later (position then %+v), settled %v after the kill; survivors served %d calls",
				inFlight, took.Round(time.Millisecond), p, time.Since(killed).Round(time.Millisecond), served)
			opening := int64(credits)
			if granted != nil {
				opening += granted.lapsing
			}
			if final.remaining != opening-charged || final.used != charged {
				t.Errorf("balance: remaining %d, used %d; want %d and %d (start %d, less %d charged to the %d answered calls)",
					final.remaining, final.used, opening-charged, charged, opening, charged, served)
			}
			if tc.blocks {
				return // the ledger's entries are the blocks', not the calls'
			}
			kinds := ledgerKinds(t, dsn, schema, account)
			if kinds["expire"] != inFlight || kinds["reserve"] != kinds["settle"]+kinds["refund"]+kinds["expire"] {
				t.Errorf("ledger %v: want exactly %d expired reservations, one per call of the killed instance, and every other one settled", kinds, inFlight)
			}
			if granted != nil {
				granted.wantSettled(t, dsn, schema, inFlight, charged, served)
			}
		})
	}
}

// TestRefundsDueWhileStoreDown stops PostgreSQL (a private server) while 20 slow calls
// run on an instance, lets their clients hang up (the instance answers "not charged",
// with refunds it cannot write), kills the instance before the store is back, and
// restarts the store: every refund comes back all the same, by the reservations'
// expiry, through the instance that survived.
func TestRefundsDueWhileStoreDown(t *testing.T) {
	testenv.SkipUnlessFull(t, "instances as processes, a private PostgreSQL stopped, one instance killed with kill -9")
	pg := testenv.StartPostgres(t)
	const account, credits, calls = "outage", 10_000, 20
	key := auth.NewKeyValue()
	common := append([]string{"-postgres", pg.DSN, "-schema", "tollgate", "-limits", "postgres"}, processTimings...)
	survivor := startProcess(t, append(common, "-fixtures", fixtures(t, account, credits, key))...)
	victim := startProcess(t, append(common, "-fixtures", fixtures(t, "", 0, key))...)

	ctx, hangUp := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			if status, _, err := slowCall(ctx, victim.url, key, 5*time.Second); err == nil {
				t.Errorf("a call whose client hung up was answered %d", status)
			}
		})
	}
	waitPosition(t, survivor.url, key, 30*time.Second, func(p position) bool { return p.inUse >= calls })
	pg.Stop()
	hangUp()
	wg.Wait()
	// The victim settles each call with a refund it cannot write: wait until it has
	// tried them all (it says so in its log), then kill it.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(victim.logs.String(), "settlement deferred") < calls {
		if time.Now().After(deadline) {
			t.Fatalf("the instance did not try to settle the %d calls:\n%s", calls, victim.logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling another process's log
	}
	victim.kill()
	pg.Start()

	p, took := waitPosition(t, survivor.url, key, 60*time.Second, func(p position) bool {
		return p.remaining == credits && p.used == 0 && p.inUse == 0
	})
	t.Logf("the %d refunds were back %v after PostgreSQL returned: %+v", calls, took.Round(time.Millisecond), p)
	kinds := ledgerKinds(t, pg.DSN, "tollgate", account)
	if kinds["expire"] != calls || kinds["refund"]+kinds["settle"] != 0 {
		t.Errorf("ledger %v: want exactly %d expired reservations and no settlement", kinds, calls)
	}
}

// postBatch sends a batch through url with an Idempotency-Key, and returns the answer,
// or the error of a call whose instance died.
func postBatch(ctx context.Context, url, key, idemKey, api, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/"+api+"/batch", strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// A batchCrash is two instances of examples/distributed on one PostgreSQL schema and
// one Redis prefix, and a batch of slow echo items sent with an Idempotency-Key to one
// of them, the victim, which the test kills while the batch runs.
type batchCrash struct {
	dsn, schema, key, idemKey, body string
	survivor, victim                *process
	lost                            chan error // the victim's answer to the batch
}

// startBatchCrash starts the survivor, with the account and its balance, and the
// victim, their rate limits and slots in limits (redis or postgres) and the plan busy
// allowing concurrency calls at once; sends the victim a batch of items echo calls of
// 3s each with idemKey; and waits until the batch is admitted (its credits reserved
// and its slot taken).
func startBatchCrash(t *testing.T, limits string, concurrency int, account string, credits int64, items int, idemKey string) *batchCrash {
	t.Helper()
	b := &batchCrash{dsn: testenv.Var(t, testenv.Postgres), key: auth.NewKeyValue(), idemKey: idemKey, lost: make(chan error, 1)}
	redisAddr := testenv.Var(t, testenv.Redis)
	b.schema = testenv.PostgresSchema(t, b.dsn)
	prefix := testenv.RedisPrefix(t, testenv.RedisClient(t, redisAddr))
	common := append([]string{"-postgres", b.dsn, "-schema", b.schema, "-redis", redisAddr, "-prefix", prefix, "-limits", limits, "-credit-block-size", "-1"}, processTimings...)
	b.survivor = startProcess(t, append(common, "-fixtures", fixturesOn(t, concurrency, account, credits, b.key))...)
	b.victim = startProcess(t, append(common, "-fixtures", fixturesOn(t, concurrency, "", 0, b.key))...)
	b.body = `{"items": [` + strings.TrimSuffix(strings.Repeat(`{"message": "m", "delay_ms": 3000},`, items), ",") + `]}`
	go func() {
		status, _, answer, err := postBatch(t.Context(), b.victim.url, b.key, idemKey, "echo", b.body)
		if err == nil {
			err = fmt.Errorf("answered %d: %s", status, answer)
		}
		b.lost <- err
	}()
	waitPosition(t, b.survivor.url, b.key, 30*time.Second, func(p position) bool { return p.used == int64(items) && p.inUse == 1 })
	return b
}

// retry sends the batch again, to the survivor.
func (b *batchCrash) retry(ctx context.Context) (int, http.Header, []byte, error) {
	return postBatch(ctx, b.survivor.url, b.key, b.idemKey, "echo", b.body)
}

// wantLost checks that the victim's answer to the batch was lost with it.
func (b *batchCrash) wantLost(t *testing.T) {
	t.Helper()
	if err := <-b.lost; !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Errorf("the batch on the killed instance: %v, want its connection lost", err)
	}
}

// TestKilledInstanceMidBatch kills an instance with SIGKILL while a batch sent with an
// Idempotency-Key runs on it, before it marks its record settling, with the limits
// (rate limits and concurrency slots) in Redis and in PostgreSQL. The batch's one
// reservation is voided at its expiry (its two rounds of items, a call timeout each,
// plus the grace) and every credit comes back, once. Its retry on the surviving
// instance is refused as running until the claim's lease ends; then it runs the batch
// again as a run of its own: it holds a concurrency slot while its items run (the
// plan's ceiling of one refuses a call meanwhile), and is charged for every item, once
// (X-Credits-Cost, each item's credits, the balance and the ledger); a third try gets
// its answer.
func TestKilledInstanceMidBatch(t *testing.T) {
	testenv.SkipUnlessFull(t, "instances as processes, one killed with kill -9 mid-batch")
	for _, limits := range []string{"redis", "postgres"} {
		t.Run("limits="+limits, func(t *testing.T) {
			// Two rounds of items of 3s each (the default parallelism is 8), on a plan
			// of one call at a time.
			const account, credits, items = "batch-crash", 1000, 16
			bc := startBatchCrash(t, limits, 1, account, credits, items, "crash-1")
			survivor, key := bc.survivor, bc.key
			bc.victim.kill()
			bc.wantLost(t)
			if status, _, b, err := bc.retry(t.Context()); err != nil || status != http.StatusConflict {
				t.Errorf("a retry at once: %d %s (%v), want 409: the batch is still running as far as anyone knows", status, b, err)
			}
			_, took := waitPosition(t, survivor.url, key, 60*time.Second, func(p position) bool { return p.used == 0 && p.inUse == 0 })
			t.Logf("the killed batch's credits were back %v after the kill", took.Round(time.Millisecond))

			// The claim's lease ended before the reservation expired: the retry runs the
			// batch again. While it runs, it holds the plan's one slot.
			type answer struct {
				status int
				header http.Header
				body   []byte
				err    error
			}
			retried := make(chan answer, 1)
			go func() {
				var a answer
				a.status, a.header, a.body, a.err = bc.retry(t.Context())
				retried <- a
			}()
			var during position
			var single int
			var singleCode string
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			err := testenv.Wait(ctx, func() error {
				select {
				case a := <-retried:
					retried <- a
					return nil // it ended: what was seen while it ran is judged below
				default:
				}
				p, err := analytics(ctx, survivor.url, key)
				if err != nil {
					return err
				}
				during = p
				if p.inUse == 0 || p.used == 0 {
					return errors.New("not admitted yet") // a slot and credits may be taken in two steps
				}
				single, singleCode, err = echoCall(ctx, survivor.url, key)
				return err
			})
			if err != nil {
				t.Fatalf("while the retry ran: %v (position %+v)", err, during)
			}
			if during.inUse != 1 || during.used != items || single != http.StatusTooManyRequests || singleCode != "concurrency_limited" {
				t.Errorf("while the retry ran: position %+v, a single call answered %d %q; want 1 slot in use, %d credits used, and the call refused 429 concurrency_limited",
					during, single, singleCode, items)
			}
			a := <-retried
			if a.err != nil || a.status != http.StatusOK || a.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("the retry after the lease: %d %s (%v), want the batch run again", a.status, a.body, a.err)
			}
			if cost := a.header.Get("X-Credits-Cost"); cost != strconv.Itoa(items) {
				t.Errorf("the retry: X-Credits-Cost %q, want %d: every item it ran charged once", cost, items)
			}
			var env struct {
				Data struct {
					Items []struct {
						Status  string `json:"status"`
						Credits int64  `json:"credits"`
					} `json:"items"`
					Summary struct {
						OK      int   `json:"ok"`
						Credits int64 `json:"credits"`
					} `json:"summary"`
				} `json:"data"`
			}
			if err := json.Unmarshal(a.body, &env); err != nil || len(env.Data.Items) != items || env.Data.Summary.OK != items || env.Data.Summary.Credits != items {
				t.Errorf("the retry's answer: %.300s (%v), want %d items, all ok, %d credits", a.body, err, items, items)
			}
			t.Logf("the retry: %d, X-Credits-Cost %s, summary %+v; while it ran: position %+v, a single call %d %q",
				a.status, a.header.Get("X-Credits-Cost"), env.Data.Summary, during, single, singleCode)
			for i, it := range env.Data.Items {
				if it.Status != "ok" || it.Credits != 1 {
					t.Errorf("the retry's item %d: %+v, want ok, charged 1 (and so every item)", i, it)
					break
				}
			}
			status, hdr, third, err := bc.retry(t.Context())
			if err != nil || status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" || !bytes.Equal(third, a.body) {
				t.Errorf("a third try: %d %s (%v), want the retry's answer replayed", status, third, err)
			}
			want := position{remaining: credits - items, used: items}
			if p, _ := waitPosition(t, survivor.url, key, 30*time.Second, func(p position) bool { return p.inUse == 0 }); p != want {
				t.Errorf("position %+v, want %+v: the killed run's credits back, the retry's kept", p, want)
			}
			if kinds := ledgerKinds(t, bc.dsn, bc.schema, account); kinds["reserve"] != 2 || kinds["expire"] != 1 || kinds["settle"] != 1 || kinds["refund"] != 0 {
				t.Errorf("ledger %v: want two reservations, the killed run's voided once and the retry's settled once", kinds)
			}
		})
	}
}

// echoCall makes a call of echo that returns at once through url, and returns its
// status and X-Error-Code.
func echoCall(ctx context.Context, url, key string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/echo", strings.NewReader(`{"message":"now"}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Error-Code"), nil
}

// TestKilledInstanceAfterBatchRan kills an instance with SIGKILL once a batch sent with
// an Idempotency-Key has run on it and marked its record settling: held, by a row lock
// the test takes in PostgreSQL, before its settlement, or after its settlement, before
// it keeps the answer. (The statement the lock holds dies with the instance: the test
// ends its backend before it lets the lock go, as PostgreSQL would once it noticed the
// connection gone.) Either way the retry on the surviving instance is refused as
// running until the claim's lease ends, then refused for good, saying the batch will
// not run again under its key: killed before its settlement, the batch is charged
// nothing (its reservation is voided at its expiry); after it, once.
func TestKilledInstanceAfterBatchRan(t *testing.T) {
	testenv.SkipUnlessFull(t, "instances as processes, one killed with kill -9 after a batch ran")
	for _, settled := range []bool{false, true} {
		name := map[bool]string{false: "before its settlement", true: "before keeping its answer"}[settled]
		t.Run(name, func(t *testing.T) {
			const account, credits, items, idemKey = "batch-ran", 1000, 4, "ran-1"
			bc := startBatchCrash(t, "redis", 1000, account, credits, items, idemKey)
			dsn, schema, survivor, key := bc.dsn, bc.schema, bc.survivor, bc.key
			table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
			record := idempotency.NewID(account, idemKey)
			admin := connect(t, dsn)

			// The items run for 3s: the reservation's row is locked before they end, and
			// the settlement waits for it.
			reservation, holder := lockRow(t, dsn, `SELECT 1 FROM `+table("tollgate_reservations")+` WHERE account_id = $1 FOR UPDATE`, account)
			waitBlocked(t, admin, holder)
			var marked bool
			if err := admin.QueryRow(t.Context(), `SELECT settling FROM `+table("tollgate_idempotency")+` WHERE id = $1`, record[:]).Scan(&marked); err != nil || !marked {
				t.Fatalf("the record while the settlement waits: settling %v (%v), want it marked", marked, err)
			}
			held := reservation
			if settled {
				// Hold the record instead, and let the settlement go: the answer waits.
				held, holder = lockRow(t, dsn, `SELECT 1 FROM `+table("tollgate_idempotency")+` WHERE id = $1 FOR UPDATE`, record[:])
				if err := reservation.Rollback(t.Context()); err != nil {
					t.Fatal(err)
				}
				waitBlocked(t, admin, holder)
				if kinds := ledgerKinds(t, dsn, schema, account); kinds["settle"] != 1 {
					t.Fatalf("ledger %v while the answer waits: want the batch settled", kinds)
				}
			}
			bc.victim.kill()
			var ended int
			if err := admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&ended); err != nil || ended != 1 {
				t.Fatalf("ending the killed instance's statement: %d backends (%v), want 1", ended, err)
			}
			if err := held.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			bc.wantLost(t)

			retry := func() (int, string) {
				t.Helper()
				status, _, b, err := bc.retry(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return status, string(b)
			}
			if status, b := retry(); status != http.StatusConflict || !strings.Contains(b, "still running") {
				t.Errorf("a retry at once: %d %s, want 409: the batch is still running as far as anyone knows", status, b)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var status int
			var answer string
			err := testenv.Wait(ctx, func() error {
				if status, answer = retry(); status == http.StatusConflict && strings.Contains(answer, "still running") {
					return errors.New("still running")
				}
				return nil
			})
			if err != nil || status != http.StatusConflict || !strings.Contains(answer, "will not run again under this key") {
				t.Fatalf("the retry after the lease: %d %s (%v), want 409: it ran, and will not run again", status, answer, err)
			}
			if status, b := retry(); status != http.StatusConflict || b != answer {
				t.Errorf("another retry: %d %s, want the same refusal", status, b)
			}
			want := position{remaining: credits, used: 0}
			if settled {
				want = position{remaining: credits - items, used: items}
			}
			if p, _ := waitPosition(t, survivor.url, key, 30*time.Second, func(p position) bool { return p.inUse == 0 && p.used == want.used }); p != want {
				t.Errorf("position %+v, want %+v", p, want)
			}
			kinds := ledgerKinds(t, dsn, schema, account)
			if settled && (kinds["reserve"] != 1 || kinds["settle"] != 1 || kinds["expire"]+kinds["refund"] != 0) {
				t.Errorf("ledger %v: want the batch's one reservation, settled once", kinds)
			}
			if !settled && (kinds["reserve"] != 1 || kinds["expire"] != 1 || kinds["settle"]+kinds["refund"] != 0) {
				t.Errorf("ledger %v: want the batch's one reservation, voided once, and nothing settled", kinds)
			}
		})
	}
}

// connect opens a connection to dsn, closed when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// lockRow runs query, a SELECT ... FOR UPDATE of one row, in a transaction of a
// connection of its own, and returns the transaction, which holds the lock until it
// ends, and the process id of its backend.
func lockRow(t *testing.T, dsn, query string, args ...any) (pgx.Tx, int) {
	t.Helper()
	conn := connect(t, dsn)
	var pid int
	if err := conn.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(t.Context(), query, args...)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("%s: %v rows (%v), want 1 locked", query, tag.RowsAffected(), err)
	}
	return tx, pid
}

// waitBlocked waits until a statement of another backend waits for a lock that the
// backend pid holds.
func waitBlocked(t *testing.T, admin *pgx.Conn, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := testenv.Wait(ctx, func() error {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("nothing waits for the lock")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for the killed instance's statement to wait for the lock: %v", err)
	}
}
