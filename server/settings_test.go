package server

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLoadPrecedence: a flag wins over the environment, which wins over the file,
// which wins over the defaults; secrets come from the environment or a file.
func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", "a-token-from-a-file-of-32-characters\n")
	cfgFile := write("config.json", `{"addr":":1","ops-addr":":2","schema":"from_file","call-timeout":"7s","access-log":false,
		"trusted-proxies":["10.0.0.0/8","192.168.0.1"],"pg-conns":3,"admin-token-file":"`+tokenFile+`",
		"plans":[{"name":"gold","credits":5}]}`)
	env := map[string]string{"TOLLGATE_OPS_ADDR": ":20", "TOLLGATE_SCHEMA": "from_env", "TOLLGATE_POSTGRES": "postgres://u:p@h/db"}
	getenv := func(k string) string { return env[k] }
	c, err := Load("serve", []string{"-config", cfgFile, "-schema", "from_flag"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.Addr != ":1": // the file's
		t.Errorf("addr %q", c.Addr)
	case c.OpsAddr != ":20": // the environment's
		t.Errorf("ops-addr %q", c.OpsAddr)
	case c.Schema != "from_flag":
		t.Errorf("schema %q", c.Schema)
	case c.CallTimeout != 7*time.Second || c.AccessLog || c.PGConns != 3:
		t.Errorf("call-timeout %s, access-log %v, pg-conns %d", c.CallTimeout, c.AccessLog, c.PGConns)
	case strings.Join(c.TrustedProxies, " ") != "10.0.0.0/8 192.168.0.1":
		t.Errorf("trusted-proxies %q", c.TrustedProxies)
	case c.AdminToken != "a-token-from-a-file-of-32-characters" || c.Postgres != "postgres://u:p@h/db":
		t.Errorf("secrets %q %q", c.AdminToken, c.Postgres)
	case len(c.Plans) != 1 || c.Plans[0].Name != "gold":
		t.Errorf("plans %+v", c.Plans)
	case c.ShutdownTimeout != 30*time.Second || c.RedisPrefix != "tollgate": // defaults
		t.Errorf("defaults: shutdown-timeout %s, redis-prefix %q", c.ShutdownTimeout, c.RedisPrefix)
	}

	for name, tc := range map[string]struct {
		args []string
		file string
		want string
	}{
		"a secret as a flag":          {args: []string{"-postgres", "x"}, want: "not defined"},
		"a secret in the file":        {file: `{"admin-token":"x"}`, want: "is a secret"},
		"an unknown key":              {file: `{"adress":":1"}`, want: "not a setting"},
		"a bad duration":              {args: []string{"-call-timeout", "soon"}, want: "not a duration"},
		"a bad log format":            {args: []string{"-log-format", "xml"}, want: "use json or text"},
		"an empty secret file":        {args: []string{"-admin-token-file", write("empty", "\n")}, want: "is empty"},
		"an argument after the flags": {args: []string{"extra"}, want: "unexpected arguments"},
		"a negative number":           {args: []string{"-pg-conns", "-1"}, want: "whole number"},
	} {
		args := tc.args
		if tc.file != "" {
			args = append([]string{"-config", write(strings.ReplaceAll(name, " ", "_"), tc.file)}, args...)
		}
		if _, err := Load("serve", args, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// TestSettingsDocumented: docs/server.md lists every setting with its environment
// variable and its default, and serve -h shows each.
func TestSettingsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/server.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var help strings.Builder
	var vals [][2]string
	fs := flagSet("serve", &help, &vals)
	fs.Usage()
	for _, s := range settings {
		flagName := s.name
		if s.secret {
			flagName += "-file"
		}
		def := s.def
		if def == "" {
			def = "none"
		}
		row := regexp.MustCompile("(?m)^\\| `-" + regexp.QuoteMeta(flagName) + "` \\| `" + envName(s.name) + "`[^|]*\\| " + regexp.QuoteMeta(def) + " \\|")
		if !row.MatchString(doc) {
			t.Errorf("docs/server.md has no row | `-%s` | `%s` ... | %s | ...", flagName, envName(s.name), def)
		}
		if !strings.Contains(help.String(), "-"+flagName+"\n") {
			t.Errorf("serve -h does not show -%s", flagName)
		}
	}
}
