package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/billing"
)

// Config is the server's settings. [Load] fills it from the command line, the
// environment and a JSON file; a host that calls [Run] may fill it itself, starting
// from [Defaults].
type Config struct {
	Addr, OpsAddr, PublicURL       string
	Postgres, Schema               string // Postgres is a secret
	Pooler                         bool
	Redis, RedisPrefix             string
	PGConns, RedisConns            int
	AdminToken, SessionSecret      string // secrets
	TrustedProxies, AllowedOrigins []string
	IETFRateHeaders, AccessLog     bool
	LogFormat, LogLevel            string
	CallTimeout, ReservationGrace  time.Duration
	SweepInterval, Lease           time.Duration
	LedgerRetention                time.Duration
	CreditBlockSize                int64
	ShutdownTimeout                time.Duration
	AllowPrivateFetch              bool
	WebhookSchedule                string
	WebhookTimeout                 time.Duration
	Demo                           bool
	ReadyFile                      string
	// Plans are the plans the accounts may be on: the JSON file's "plans", or
	// [DefaultPlans].
	Plans []billing.Plan
	// TracerProvider, if set, makes OpenTelemetry traces of the calls (package
	// tracing). It is not a setting of the command: a host that calls [Run] sets it.
	TracerProvider trace.TracerProvider
}

// DefaultPlans are the plans of a server whose settings name none.
var DefaultPlans = []billing.Plan{
	{Name: "free", Credits: 50, RatePerMinute: 5, Concurrency: 1, GraphQLMaxAPIs: 1, BatchMaxItems: 10},
	{Name: "pro", Credits: 100000, RatePerMinute: 600, Concurrency: 10, GraphQLMaxAPIs: 10, BatchMaxItems: 100},
}

// A setting is one of the server's settings: a flag -name, an environment variable
// TOLLGATE_NAME, and a key "name" of the JSON file. A secret has no flag and no key of
// its own (a flag's value is seen by every user of the machine, a file's is often
// committed): it is read from TOLLGATE_NAME, or from the file that -name-file,
// TOLLGATE_NAME_FILE or the key "name-file" names.
type setting struct {
	name   string
	def    string // the default as -h and docs/server.md show it
	help   string
	secret bool
	bind   func(c *Config) any // the field: *string, *bool, *int, *time.Duration, *[]string
}

// settings lists every setting, in the order -h shows them.
var settings = []setting{
	{"addr", ":8080", "the address the doors listen on (host:port; port 0 picks a free one)", false, func(c *Config) any { return &c.Addr }},
	{"ops-addr", ":9090", "the address of the operators' listener: /metrics, /healthz, /readyz (\"off\": none)", false, func(c *Config) any { return &c.OpsAddr }},
	{"public-url", "", "the origin clients reach the server at, the OAuth issuer of MCP's tokens (default http://localhost:PORT, PORT the one listened on)", false, func(c *Config) any { return &c.PublicURL }},
	{"postgres", "", "the PostgreSQL connection string, such as postgres://user:password@host:5432/db?sslmode=require (required)", true, func(c *Config) any { return &c.Postgres }},
	{"schema", "tollgate", "the PostgreSQL schema of the tables", false, func(c *Config) any { return &c.Schema }},
	{"pooler", "false", "PostgreSQL is reached through a pooler in transaction mode (PgBouncer): no startup parameters, the role's search_path", false, func(c *Config) any { return &c.Pooler }},
	{"redis", "", "the Redis address (host:port) of the rate limits and concurrency slots (default: they live in PostgreSQL)", false, func(c *Config) any { return &c.Redis }},
	{"redis-prefix", "tollgate", "the prefix of the Redis keys", false, func(c *Config) any { return &c.RedisPrefix }},
	{"pg-conns", "16", "the PostgreSQL connections of the instance, all opened at start", false, func(c *Config) any { return &c.PGConns }},
	{"redis-conns", "64", "the Redis connections of the instance, all opened at start", false, func(c *Config) any { return &c.RedisConns }},
	{"admin-token", "", "the bearer token of the admin API, at least 32 characters (default: no admin API)", true, func(c *Config) any { return &c.AdminToken }},
	{"session-secret", "", "the secret that signs session tokens and the dashboard's cookie, at least 32 bytes, the same on every instance (default: a random one made at start, so sessions end when the server stops)", true, func(c *Config) any { return &c.SessionSecret }},
	{"trusted-proxies", "", "the reverse proxies whose X-Forwarded-For is believed, CIDR prefixes separated by commas (default: none)", false, func(c *Config) any { return &c.TrustedProxies }},
	{"allowed-origins", "", "the origins whose scripts may call REST, GraphQL and MCP, separated by commas (default: every origin)", false, func(c *Config) any { return &c.AllowedOrigins }},
	{"ietf-rate-headers", "false", "add the IETF draft's RateLimit and RateLimit-Policy headers to the answers of calls", false, func(c *Config) any { return &c.IETFRateHeaders }},
	{"access-log", "true", "log one line per request (request id, door, account, key id, APIs, status, error code, credits, duration)", false, func(c *Config) any { return &c.AccessLog }},
	{"log-format", "json", "the format of the log on standard error: json or text", false, func(c *Config) any { return &c.LogFormat }},
	{"log-level", "info", "the lowest level logged: debug, info, warn or error", false, func(c *Config) any { return &c.LogLevel }},
	{"call-timeout", "30s", "how long one API call may run", false, func(c *Config) any { return &c.CallTimeout }},
	{"reservation-grace", "30s", "how long a call's reservation outlives the call timeout before a sweep gives its credits back", false, func(c *Config) any { return &c.ReservationGrace }},
	{"sweep-interval", "15s", "how often the instance voids the expired reservations", false, func(c *Config) any { return &c.SweepInterval }},
	{"ledger-retention", "2160h", "how long after its period ended a ledger entry is kept before it is folded into its period's totals, at least 168h (negative: every entry is kept)", false, func(c *Config) any { return &c.LedgerRetention }},
	{"credit-block-size", "1000", "the most credits of an account one instance reserves at a time and spends call by call, recording the calls' charges with one roll for many (negative: each call's credits are reserved in the database)", false, func(c *Config) any { return &c.CreditBlockSize }},
	{"lease", "0s", "how long a concurrency slot lasts without renewal (0: twice the call timeout, at least 30s)", false, func(c *Config) any { return &c.Lease }},
	{"shutdown-timeout", "30s", "how long the calls in flight may take to finish after SIGTERM or SIGINT", false, func(c *Config) any { return &c.ShutdownTimeout }},
	{"allow-private-fetch", "false", "let URL-form file fetches, OAuth client metadata fetches and webhook deliveries reach private and loopback addresses (development only)", false, func(c *Config) any { return &c.AllowPrivateFetch }},
	{"webhook-schedule", "", "the waits between a webhook delivery's attempts, durations separated by commas (default: 5s, 5m, 30m, ... about three days)", false, func(c *Config) any { return &c.WebhookSchedule }},
	{"webhook-timeout", "15s", "how long a webhook delivery's attempt may take", false, func(c *Config) any { return &c.WebhookTimeout }},
	{"demo", "false", "create a demo account on the pro plan (or the first plan) at start and print its key; on a later start it exists and nothing is printed", false, func(c *Config) any { return &c.Demo }},
	{"ready-file", "", "once serving, write the addresses listened on to this file as JSON: {\"addr\":...,\"ops_addr\":...}", false, func(c *Config) any { return &c.ReadyFile }},
}

// Defaults returns the settings' defaults.
func Defaults() Config {
	c := Config{Plans: slices.Clone(DefaultPlans)}
	for _, s := range settings {
		if err := set(&c, s, s.def); err != nil {
			panic("server: the default of " + s.name + ": " + err.Error())
		}
	}
	return c
}

// envName returns the environment variable of a setting.
func envName(name string) string {
	return "TOLLGATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// set parses raw into the setting's field.
func set(c *Config, s setting, raw string) error {
	switch p := s.bind(c).(type) {
	case *string:
		*p = raw
	case *bool:
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("%s: %q is not true or false", s.name, raw)
		}
		*p = v
	case *int:
		v, err := strconv.Atoi(raw)
		if err != nil || v < 0 {
			return fmt.Errorf("%s: %q is not a whole number of zero or more", s.name, raw)
		}
		*p = v
	case *int64:
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", s.name, raw)
		}
		*p = v
	case *time.Duration:
		v, err := time.ParseDuration(raw)
		if err != nil || v < 0 {
			return fmt.Errorf("%s: %q is not a duration such as 30s or 2m", s.name, raw)
		}
		*p = v
	case *[]string:
		*p = nil
		for _, v := range strings.Split(raw, ",") {
			if v = strings.TrimSpace(v); v != "" {
				*p = append(*p, v)
			}
		}
	}
	return nil
}

// setSecretFile reads a secret from the file path names.
func setSecretFile(c *Config, s setting, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s-file: %w", s.name, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return fmt.Errorf("%s-file: %s is empty", s.name, path)
	}
	return set(c, s, v)
}

// rawFlag records a flag's value as given, to be applied after the file and the
// environment.
type rawFlag struct {
	name   string
	isBool bool
	vals   *[][2]string
}

func (f rawFlag) String() string { return "" }
func (f rawFlag) Set(v string) error {
	*f.vals = append(*f.vals, [2]string{f.name, v})
	return nil
}
func (f rawFlag) IsBoolFlag() bool { return f.isBool }

// flagSet returns the flag set of serve (or migrate) that records what it is given.
func flagSet(cmd string, out io.Writer, vals *[][2]string) *flag.FlagSet {
	fs := flag.NewFlagSet("tollgate-server "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Var(rawFlag{name: "config", vals: vals}, "config", "a JSON file of settings (environment: TOLLGATE_CONFIG)")
	var c Config
	for _, s := range settings {
		name, help := s.name, s.help
		_, isBool := s.bind(&c).(*bool)
		if s.secret {
			name, isBool = s.name+"-file", false
			help = "the file holding " + s.name + ": " + help + " (environment: " + envName(s.name) + " holds the value itself, " + envName(name) + " the file)"
		} else {
			help += " (environment: " + envName(name) + ")"
		}
		fs.Var(rawFlag{name: name, isBool: isBool, vals: vals}, name, help)
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: tollgate-server %s [flags]\n\n", cmd)
		fmt.Fprintln(out, "Settings come from the flags, then TOLLGATE_* environment variables, then the -config file, then the defaults.")
		fmt.Fprintln(out, "Secrets (postgres, admin-token, session-secret) come from the environment or a file, never a flag's value.")
		fmt.Fprintln(out)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			for _, s := range settings {
				if s.name == f.Name && s.def != "" {
					def = " (default " + s.def + ")"
				}
			}
			fmt.Fprintf(out, "  -%s\n    \t%s%s\n", f.Name, f.Usage, def)
		})
	}
	return fs
}

// Load reads the settings of a subcommand (serve or migrate) from args, the
// environment (getenv) and the JSON file of -config or TOLLGATE_CONFIG: a flag wins
// over the environment, which wins over the file, which wins over the defaults. -h
// prints every setting with its default and returns flag.ErrHelp.
func Load(cmd string, args []string, getenv func(string) string, out io.Writer) (Config, error) {
	var vals [][2]string
	fs := flagSet(cmd, out, &vals)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c := Defaults()
	path := getenv("TOLLGATE_CONFIG")
	for _, v := range vals {
		if v[0] == "config" {
			path = v[1]
		}
	}
	if path != "" {
		if err := loadFile(&c, path); err != nil {
			return Config{}, err
		}
	}
	for _, s := range settings {
		if s.secret {
			if v := getenv(envName(s.name + "-file")); v != "" {
				if err := setSecretFile(&c, s, v); err != nil {
					return Config{}, fmt.Errorf("%s: %w", envName(s.name+"-file"), err)
				}
			}
		}
		if v, ok := lookup(getenv, envName(s.name)); ok {
			if err := set(&c, s, v); err != nil {
				return Config{}, fmt.Errorf("%s: %w", envName(s.name), err)
			}
		}
	}
	for _, v := range vals {
		s, file, ok := find(v[0])
		switch {
		case !ok:
		case file:
			if err := setSecretFile(&c, s, v[1]); err != nil {
				return Config{}, err
			}
		default:
			if err := set(&c, s, v[1]); err != nil {
				return Config{}, err
			}
		}
	}
	return c, c.check()
}

// lookup returns an environment variable that is set and not empty.
func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// find returns the setting of a flag or key name, and whether the name is a secret's
// file.
func find(name string) (setting, bool, bool) {
	for _, s := range settings {
		if s.name == name && !s.secret {
			return s, false, true
		}
		if s.secret && name == s.name+"-file" {
			return s, true, true
		}
	}
	return setting{}, false, false
}

// loadFile applies the JSON file of settings at path: an object whose keys are the
// settings' names (a secret's as name-file), and "plans".
func loadFile(c *Config, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("-config %s: not a JSON object of settings: %w", path, err)
	}
	for key, v := range raw {
		if key == "plans" {
			var plans []billing.Plan
			if err := json.Unmarshal(v, &plans); err != nil {
				return fmt.Errorf("-config %s: plans: %w", path, err)
			}
			c.Plans = plans
			continue
		}
		s, file, ok := find(key)
		if !ok {
			for _, sec := range settings {
				if sec.secret && sec.name == key {
					return fmt.Errorf("-config %s: %q is a secret: give it in %s, or name its file with %q", path, key, envName(key), key+"-file")
				}
			}
			return fmt.Errorf("-config %s: %q is not a setting (tollgate-server serve -h lists them)", path, key)
		}
		str, err := rawString(v)
		if err != nil {
			return fmt.Errorf("-config %s: %s: %w", path, key, err)
		}
		if file {
			err = setSecretFile(c, s, str)
		} else {
			err = set(c, s, str)
		}
		if err != nil {
			return fmt.Errorf("-config %s: %w", path, err)
		}
	}
	return nil
}

// rawString returns a JSON value as the text a flag would give: a string as it is,
// a number or boolean as written, a list of strings joined with commas.
func rawString(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var list []string
	if json.Unmarshal(v, &list) == nil {
		return strings.Join(list, ","), nil
	}
	var scalar any
	if err := json.Unmarshal(v, &scalar); err != nil {
		return "", err
	}
	switch scalar.(type) {
	case bool, float64:
		return strings.TrimSpace(string(v)), nil
	}
	return "", errors.New("give a string, a number, true or false, or a list of strings")
}

// check refuses settings that cannot serve.
func (c *Config) check() error {
	switch {
	case c.LogFormat != "json" && c.LogFormat != "text":
		return fmt.Errorf("log-format %q: use json or text", c.LogFormat)
	case c.CallTimeout == 0 || c.ReservationGrace == 0 || c.SweepInterval == 0 || c.ShutdownTimeout == 0:
		return errors.New("call-timeout, reservation-grace, sweep-interval and shutdown-timeout must be positive")
	case c.Schema == "":
		return errors.New("schema must not be empty")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}
