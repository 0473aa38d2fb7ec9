// Package server is Tollgate as a server of its own: one instance of a deployment on
// PostgreSQL and Redis that serves every door (REST and batches, GraphQL, MCP with its
// OAuth authorization server, the account holders' API and sessions, the dashboard,
// and the admin API) on one address, and the operators' endpoints (/metrics, /healthz,
// /readyz) on another. Command tollgate-server is [Main] over the sample catalog; a
// host that serves its own APIs links this package and calls [Main] (or [Run]) with
// them:
//
//	func main() { os.Exit(server.Main(os.Args[1:], myapis.All()...)) }
//
// The settings, their defaults and where they come from are in docs/server.md, and
// printed by tollgate-server serve -h.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/deploy"
	"github.com/tollgate-dev/tollgate/internal/ops"
	"github.com/tollgate-dev/tollgate/internal/webhookflag"
	"github.com/tollgate-dev/tollgate/store/postgres"
)

// Main runs the command: "tollgate-server migrate [flags]" migrates the schema,
// "tollgate-server serve [flags]" serves until SIGTERM or SIGINT, with apis as its
// catalog. It returns the process's exit code: 0 once it has finished (served and shut
// down gracefully), 2 for a mistake in the command line or the settings, 1 for any
// other failure.
func Main(args []string, apis ...catalog.API) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return main(ctx, args, os.Getenv, os.Stdout, os.Stderr, apis)
}

const usage = `Usage:
  tollgate-server migrate [flags]   create the PostgreSQL schema if missing and migrate it
  tollgate-server serve [flags]     serve every door until SIGTERM or SIGINT

tollgate-server serve -h lists the settings.
`

func main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, apis []catalog.API) int {
	if len(args) == 0 || (args[0] != "migrate" && args[0] != "serve") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd := args[0]
	cfg, err := Load(cmd, args[1:], getenv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "tollgate-server:", err)
		return 2
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate-server:", err)
		return 2
	}
	if cmd == "migrate" {
		err = Migrate(ctx, cfg, log)
	} else {
		err = run(ctx, cfg, log, stdout, apis)
	}
	if err != nil {
		log.Error("tollgate-server: "+cmd+" failed", "error", err.Error())
		return 1
	}
	return 0
}

// Migrate creates the schema of cfg if it is missing and brings it to the store's
// version. Several processes may run it at once against one database: each migration
// is applied once.
func Migrate(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.Postgres == "" {
		return errNoPostgres
	}
	if err := deploy.Migrate(ctx, cfg.Postgres, cfg.Schema, cfg.Pooler); err != nil {
		return err
	}
	log.Info("tollgate-server: the schema is migrated", "schema", cfg.Schema, "version", postgres.SchemaVersion)
	return nil
}

var errNoPostgres = errors.New("no PostgreSQL connection string: set TOLLGATE_POSTGRES, or name a file holding it with -postgres-file")

// Run serves cfg with apis as the catalog until ctx is done, then shuts down
// gracefully (see [Main]), logging to log (nil: JSON on standard error, as cfg says).
// It returns nil once it has shut down in order, and an error if it could not start,
// or if the calls in flight did not finish within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, log *slog.Logger, apis ...catalog.API) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if log == nil {
		var err error
		if log, err = newLogger(cfg, os.Stderr); err != nil {
			return err
		}
	}
	return run(ctx, cfg, log, io.Discard, apis)
}

func run(ctx context.Context, cfg Config, log *slog.Logger, stdout io.Writer, apis []catalog.API) (err error) {
	if cfg.Postgres == "" {
		return errNoPostgres
	}
	reg := &catalog.Registry{}
	for _, a := range apis {
		if err := reg.Register(a); err != nil {
			return err
		}
	}
	if len(reg.List()) == 0 {
		return errors.New("no API to serve: give Run (or Main) the catalog's APIs")
	}
	plans, err := billing.NewPlans(cfg.Plans...)
	if err != nil {
		return fmt.Errorf("plans: %w", err)
	}
	schedule, err := webhookflag.ParseSchedule(cfg.WebhookSchedule)
	if err != nil {
		return fmt.Errorf("webhook-schedule: %w", err)
	}
	edgeOpts := edge.Options{AllowedOrigins: cfg.AllowedOrigins, IETFRateHeaders: cfg.IETFRateHeaders}
	for _, p := range cfg.TrustedProxies {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			if addr, aerr := netip.ParseAddr(p); aerr == nil {
				prefix = netip.PrefixFrom(addr, addr.BitLen())
			} else {
				return fmt.Errorf("trusted-proxies: %q is not an address or a CIDR prefix such as 10.0.0.0/8", p)
			}
		}
		edgeOpts.TrustedProxies = append(edgeOpts.TrustedProxies, prefix)
	}
	if cfg.AccessLog {
		edgeOpts.AccessLog = log
	}

	// The operators' listener first, so that /readyz answers 503 "starting" while the
	// stores open; then the doors' listener, whose port the OAuth issuer names by
	// default.
	gate := ops.NewGate()
	var opsSrv *http.Server
	var opsLn net.Listener
	if cfg.OpsAddr != "" && cfg.OpsAddr != "off" {
		if opsLn, err = net.Listen("tcp", cfg.OpsAddr); err != nil {
			return fmt.Errorf("ops-addr: %w", err)
		}
		opsSrv = ops.NewServer(gate.Mux(), log)
		go opsSrv.Serve(opsLn)
		defer opsSrv.Close() // after the graceful Shutdown below, nothing
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("addr: %w", err)
	}
	defer ln.Close()
	publicURL := strings.TrimSuffix(cfg.PublicURL, "/")
	if publicURL == "" {
		publicURL = localURL(ln.Addr().String())
	}
	secret := []byte(cfg.SessionSecret)
	if cfg.SessionSecret == "" {
		secret = deploy.RandomSecret()
		log.Warn("tollgate-server: sessions are signed with a random secret made at start: they end when the server stops, and another instance does not accept them; set TOLLGATE_SESSION_SECRET")
	}
	log.Info("tollgate-server: starting", settingsAttrs(cfg)...)

	in, err := deploy.Open(ctx, deploy.Config{
		Postgres: cfg.Postgres, Schema: cfg.Schema, Pooler: cfg.Pooler, Redis: cfg.Redis, RedisPrefix: cfg.RedisPrefix,
		PGConns: cfg.PGConns, RedisConns: cfg.RedisConns, Catalog: reg, Plans: plans, Logger: log,
		CallTimeout: cfg.CallTimeout, ReservationGrace: cfg.ReservationGrace, SweepInterval: cfg.SweepInterval, Lease: cfg.Lease,
		LedgerRetention: cfg.LedgerRetention, CreditBlockSize: cfg.CreditBlockSize,
		AllowPrivateFetch: cfg.AllowPrivateFetch, SessionSecret: secret, AdminToken: cfg.AdminToken,
		PublicURL: publicURL, Edge: edgeOpts, WebhookSchedule: schedule, WebhookTimeout: cfg.WebhookTimeout,
		TracerProvider: cfg.TracerProvider,
	})
	if err != nil {
		return err
	}
	shutdown := func() error {
		gate.Stopping()
		log.Info("tollgate-server: shutting down: the doors take no new request; the calls in flight finish", "timeout", cfg.ShutdownTimeout.String())
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		err := in.Close(sctx)
		if opsSrv != nil {
			octx, ocancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ocancel()
			opsSrv.Shutdown(octx)
		}
		if err != nil {
			return fmt.Errorf("the calls in flight did not finish within shutdown-timeout (%s): %w", cfg.ShutdownTimeout, err)
		}
		log.Info("tollgate-server: stopped")
		return nil
	}
	if cfg.Demo {
		if err := demo(ctx, in.Accounts, plans, stdout, log); err != nil {
			shutdown()
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- in.Serve(ln) }()
	gate.Serving(in.Ready, in.Metrics)
	opsAddr := ""
	if opsLn != nil {
		opsAddr = opsLn.Addr().String()
	}
	log.Info("tollgate-server: serving", "addr", ln.Addr().String(), "ops_addr", opsAddr, "public_url", publicURL)
	if cfg.ReadyFile != "" {
		if err := writeReadyFile(cfg.ReadyFile, ln.Addr().String(), opsAddr); err != nil {
			shutdown()
			return err
		}
	}
	select {
	case err := <-errc:
		shutdown()
		return err
	case <-ctx.Done():
	}
	return shutdown()
}

// demo creates the demo account and prints its key, once.
func demo(ctx context.Context, mgr *accounts.Manager, plans *billing.Plans, stdout io.Writer, log *slog.Logger) error {
	plan := "pro"
	if _, ok := plans.Lookup(plan); !ok {
		plan = plans.All()[0].Name
	}
	_, _, value, err := mgr.CreateAccount(ctx, accounts.Spec{ID: "demo", Plan: plan})
	if err != nil {
		if _, ierr := mgr.Account(ctx, "demo"); ierr == nil {
			log.Info("tollgate-server: the demo account exists; its keys were printed when it was made")
			return nil
		}
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(stdout, "API key: %s\n", value)
	return nil
}

// writeReadyFile writes the addresses listened on, atomically: a reader never sees a
// part of the file.
func writeReadyFile(path, addr, opsAddr string) error {
	b, _ := json.Marshal(map[string]string{"addr": addr, "ops_addr": opsAddr})
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ready-*")
	if err != nil {
		return fmt.Errorf("ready-file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("ready-file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("ready-file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("ready-file: %w", err)
	}
	return nil
}

// settingsAttrs returns the settings to log at start: every one but the secrets, which
// are logged as set or not.
func settingsAttrs(cfg Config) []any {
	var attrs []any
	for _, s := range settings {
		v := s.bind(&cfg)
		if s.secret {
			state := "unset"
			if *(v.(*string)) != "" {
				state = "set"
			}
			attrs = append(attrs, slog.String(s.name, state))
			continue
		}
		switch p := v.(type) {
		case *string:
			attrs = append(attrs, slog.String(s.name, *p))
		case *bool:
			attrs = append(attrs, slog.Bool(s.name, *p))
		case *int:
			attrs = append(attrs, slog.Int(s.name, *p))
		case *int64:
			attrs = append(attrs, slog.Int64(s.name, *p))
		case *time.Duration:
			attrs = append(attrs, slog.String(s.name, p.String()))
		case *[]string:
			attrs = append(attrs, slog.String(s.name, strings.Join(*p, ",")))
		}
	}
	names := make([]string, 0, len(cfg.Plans))
	for _, p := range cfg.Plans {
		names = append(names, p.Name)
	}
	return append(attrs, slog.String("plans", strings.Join(names, ",")))
}

// localURL returns the origin of a listen address for clients on this machine:
// http://localhost:PORT when it is every interface.
func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log-level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger returns the log the settings ask for, on w.
func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}
