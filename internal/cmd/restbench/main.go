// Command restbench measures the throughput of a whole REST call through Tollgate against
// a bare net/http handler that writes the same envelope, in the same run, and prints the
// ratio. It starts both servers on loopback, then drives them in alternating rounds so
// that the machine's noise falls on both alike:
//
//	go run ./internal/cmd/restbench                 # uses wrk if it is on PATH
//	go run ./internal/cmd/restbench -rounds 5 -d 5s -c 64
//	go run ./internal/cmd/restbench -client go      # the built-in Go load generator
//
// The Tollgate server is the example assembly (memory stores, the sample catalog) with a
// plan whose limits never deny, so every call does the full work: edge check, key lookup,
// restrictions, validation, rate limit, concurrency slot, credit reservation, handler,
// settlement, envelope and headers. The call is GET /v1/hash?text=hello.
//
// The same comparison with wrk by hand, against go run ./examples/server (whose pro
// plan's rate limit would deny most of a load test, so use -fixtures with a generous
// plan):
//
//	wrk -t2 -c64 -d10s -H "x-api-key: $KEY" "http://127.0.0.1:8080/v1/hash?text=hello"
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/benchhttp"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/store/memory"
)

const path = "/v1/hash?text=hello"

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each drives both servers once")
	dur := flag.Duration("d", 5*time.Second, "duration of each drive")
	conns := flag.Int("c", 64, "concurrent connections")
	client := flag.String("client", "auto", "load generator: wrk, go, or auto (wrk if on PATH)")
	flag.Parse()
	if err := run(*rounds, *dur, *conns, *client); err != nil {
		fmt.Fprintln(os.Stderr, "restbench:", err)
		os.Exit(1)
	}
}

func run(rounds int, dur time.Duration, conns int, client string) error {
	if client == "auto" {
		client = "go"
		if _, err := exec.LookPath("wrk"); err == nil {
			client = "wrk"
		}
	}
	tg, key, err := tollgateHandler()
	if err != nil {
		return err
	}
	tgURL, stopTG, err := serve(tg)
	if err != nil {
		return err
	}
	defer stopTG()
	headers, err := answerHeaders(tgURL+path, key)
	if err != nil {
		return err
	}
	bareURL, stopBare, err := serve(benchhttp.BareHash(headers))
	if err != nil {
		return err
	}
	defer stopBare()

	fmt.Printf("load generator: %s, %d connections, %s per drive, %d rounds\n", client, conns, dur, rounds)
	var ratios []float64
	for i := 1; i <= rounds; i++ {
		// Alternate which server goes first, so that a drift in the machine's load
		// during a round does not favour either.
		var b, t float64
		drives := []struct {
			url, key string
			rate     *float64
		}{{bareURL, "", &b}, {tgURL, key, &t}}
		if i%2 == 0 {
			drives[0], drives[1] = drives[1], drives[0]
		}
		for _, d := range drives {
			if *d.rate, err = drive(client, d.url+path, d.key, dur, conns); err != nil {
				return err
			}
		}
		ratios = append(ratios, t/b)
		fmt.Printf("round %d: bare %.0f req/s, tollgate %.0f req/s, ratio %.3f\n", i, b, t, t/b)
	}
	slices.Sort(ratios)
	fmt.Printf("median ratio tollgate/bare: %.3f (min %.3f, max %.3f)\n", ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
	return nil
}

// tollgateHandler assembles the example service with a plan that never denies.
func tollgateHandler() (http.Handler, string, error) {
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		return nil, "", err
	}
	plans, err := billing.NewPlans(billing.Plan{Name: "bench", Credits: 1 << 60, RatePerMinute: 1 << 30, Concurrency: 1 << 20})
	if err != nil {
		return nil, "", err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := tollgate.New(reg, tollgate.Stores{
		Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter(),
	}, plans, &tollgate.Options{Logger: quiet})
	if err != nil {
		return nil, "", err
	}
	_, _, key, err := svc.CreateAccount(context.Background(), tollgate.AccountSpec{ID: "bench", Plan: "bench"})
	if err != nil {
		return nil, "", err
	}
	h, err := rest.NewHandler(svc, &rest.Options{Logger: quiet})
	return h, key, err
}

// answerHeaders makes one call to Tollgate and returns the headers of its answer, for the
// baseline to write the same.
func answerHeaders(url, key string) (http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tollgate answered %s", resp.Status)
	}
	return resp.Header, nil
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// drive loads url for dur and returns the completed requests per second.
func drive(client, url, key string, dur time.Duration, conns int) (float64, error) {
	if client == "wrk" {
		return driveWrk(url, key, dur, conns)
	}
	return driveGo(url, key, dur, conns)
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func driveWrk(url, key string, dur time.Duration, conns int) (float64, error) {
	args := []string{"-t2", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(dur.Seconds())) + "s"}
	if key != "" {
		args = append(args, "-H", "x-api-key: "+key)
	}
	out, err := exec.Command("wrk", append(args, url)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("wrk printed no rate:\n%s", out)
	}
	if regexp.MustCompile(`Non-2xx`).Match(out) {
		return 0, fmt.Errorf("wrk saw failed calls:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func driveGo(url, key string, dur time.Duration, conns int) (float64, error) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	var done, failed atomic.Int64
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if key != "" {
					req.Header.Set("X-Api-Key", key)
				}
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("%d calls to %s failed", n, url)
	}
	return float64(done.Load()) / dur.Seconds(), nil
}
