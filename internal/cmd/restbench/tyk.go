package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// errNoTyk says how to give the tyk server its gateway.
var errNoTyk = errors.New("the tyk server runs a Tyk gateway binary that restbench does not build: " +
	"build Tyk OSS gateway v5.14.0 from its source and give its path with -tyk or TYK_BIN")

// startTyk runs the Tyk gateway bin in front of an upstream that serves the hash API
// (the bare server, a restbench process of its own), with the settings of Tyk's
// example configuration (tyk.conf.example: Redis pool sizes, hashed keys, 500 idle
// upstream connections per host, no analytics), one API definition that proxies
// /v1/ to the upstream with key authentication in the X-Api-Key header, and one
// policy that rate-limits and meters a quota, both so high that they never deny; it
// creates a key on that policy through the gateway's admin API, and returns the
// gateway's base URL. Tyk keeps its keys and quota counters in the Redis of cfg, which
// must be host:port. With redisLimiter, the gateway keeps its rate limits in Redis too
// (enable_redis_rolling_limiter) rather than in its own memory (the distributed rate
// limiter, Tyk's default, which its example configuration keeps).
func (s *server) startTyk(cfg storeConfig, bin string, redisLimiter bool) (base string, err error) {
	if bin == "" {
		return "", errNoTyk
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w (%v)", errNoTyk, err)
	}
	redisHost, redisPort, err := net.SplitHostPort(cfg.redis)
	if err != nil {
		return "", fmt.Errorf("the tyk server needs -redis as host:port: %w", err)
	}
	up := &server{name: "upstream", kind: "bare"}
	upBase, err := up.startChild(cfg, 1, "", "")
	if err != nil {
		return "", fmt.Errorf("upstream: %w", err)
	}
	s.parts = []part{{"upstream", up.cmd.Process.Pid}}
	dir, err := os.MkdirTemp("", "restbench-tyk-")
	if err != nil {
		up.stop()
		return "", err
	}
	s.stop = func() { up.stop(); os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			s.stop()
		}
	}()

	port, err := freePort()
	if err != nil {
		return "", err
	}
	var b [16]byte
	rand.Read(b[:])
	secret := hex.EncodeToString(b[:])
	rp, _ := strconv.Atoi(redisPort)
	conf := map[string]any{
		"listen_address": "127.0.0.1", "listen_port": port, "secret": secret,
		"template_path": filepath.Join(dir, "templates"), "use_db_app_configs": false,
		"app_path": filepath.Join(dir, "apps"), "middleware_path": filepath.Join(dir, "middleware"),
		"storage": map[string]any{"type": "redis", "host": redisHost, "port": rp, "username": "", "password": "",
			"database": 0, "optimisation_max_idle": 2000, "optimisation_max_active": 4000},
		"enable_analytics": false, "analytics_config": map[string]any{"type": "", "ignored_ips": []string{}},
		"dns_cache":         map[string]any{"enabled": false, "ttl": 3600, "check_interval": 60},
		"allow_master_keys": false,
		"policies": map[string]any{"policy_source": "file", "allow_explicit_policy_id": true,
			"policy_record_name": filepath.Join(dir, "policies.json")},
		"http_server_options": map[string]any{"xff_depth": 1, "enable_strict_routes": true,
			"enable_path_prefix_matching": true, "enable_path_suffix_matching": true},
		"hash_keys": true, "hash_key_function": "murmur64", "suppress_redis_signal_reload": false,
		"force_global_session_lifetime": false, "max_idle_connections_per_host": 500,
	}
	if redisLimiter {
		conf["enable_redis_rolling_limiter"] = true
	}
	api := map[string]any{
		"name": "bench", "api_id": "bench", "org_id": "default", "active": true, "use_keyless": false,
		"auth":         map[string]any{"auth_header_name": "X-Api-Key"},
		"definition":   map[string]any{"location": "header", "key": "version"},
		"version_data": map[string]any{"not_versioned": true, "versions": map[string]any{"Default": map[string]any{"name": "Default", "use_extended_paths": true}}},
		"proxy":        map[string]any{"listen_path": "/v1/", "target_url": upBase, "strip_listen_path": false},
	}
	policies := map[string]any{"bench": map[string]any{
		"rate": 1 << 30, "per": 1, "quota_max": int64(1) << 50, "quota_renewal_rate": 3600, "org_id": "default", "active": true,
		"access_rights": map[string]any{"bench": map[string]any{"api_name": "bench", "api_id": "bench", "versions": []string{"Default"}}},
	}}
	files := map[string]any{"tyk.conf": conf, "apps/bench.json": api, "policies.json": policies}
	for _, sub := range []string{"apps", "templates", "middleware"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return "", err
		}
	}
	for name, v := range files {
		data, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	// The gateway parses the templates of its error answers at start-up.
	if err := os.WriteFile(filepath.Join(dir, "templates", "error.json"), []byte(`{"error": "{{.Message}}"}`+"\n"), 0o600); err != nil {
		return "", err
	}

	logPath := filepath.Join(dir, "tyk.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	s.cmd = exec.Command(bin, "start", "--conf="+filepath.Join(dir, "tyk.conf"))
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = dir, logFile, logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return "", err
	}
	s.stop = func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.cmd.Wait()
		logFile.Close()
		up.stop()
		os.RemoveAll(dir)
	}
	base = "http://127.0.0.1:" + strconv.Itoa(port)
	logTail := func() string {
		data, _ := os.ReadFile(logPath)
		return string(data[max(0, len(data)-2000):])
	}
	if err := waitHTTP(base+"/hello", 60*time.Second); err != nil {
		return "", fmt.Errorf("the gateway did not answer %s/hello: %w; its log ends:\n%s", base, err, logTail())
	}
	var created struct {
		Key string `json:"key"`
	}
	body := `{"apply_policies": ["bench"], "org_id": "default", "expires": 0, "alias": "restbench",
		"access_rights": {"bench": {"api_name": "bench", "api_id": "bench", "versions": ["Default"]}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/tyk/keys/create", bytes.NewReader([]byte(body)))
	req.Header.Set("X-Tyk-Authorization", secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("the gateway's admin API: %w", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &created) != nil || created.Key == "" {
		return "", fmt.Errorf("POST /tyk/keys/create: %s %.300s; the gateway's log ends:\n%s", resp.Status, data, logTail())
	}
	s.key = created.Key
	stop := s.stop
	s.stop = func() {
		req, _ := http.NewRequest(http.MethodDelete, base+"/tyk/keys/"+created.Key, nil)
		req.Header.Set("X-Tyk-Authorization", secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		stop()
	}
	return base, nil
}

// freePort returns a TCP port of the loopback interface that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers 200, for up to d.
func waitHTTP(url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
