package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

// startDistributed builds examples/distributed and runs one instance of it on the
// PostgreSQL and Redis of cfg, in a new schema and under a new Redis prefix, with a
// fixtures file that holds the bench account (as startExample's), and returns its base
// URL. Its connections to PostgreSQL carry the application_name restbench. Stopping
// it drops the schema and the Redis keys. extra are more flags of the instance.
func (s *server) startDistributed(cfg storeConfig, extra ...string) (string, error) {
	dir, err := buildExample("./examples/distributed")
	if err != nil {
		return "", err
	}
	var b [6]byte
	rand.Read(b[:])
	schema, prefix := "restbench_"+hex.EncodeToString(b[:]), "restbench-"+hex.EncodeToString(b[:])
	dsn, err := withApplicationName(cfg.postgres, "restbench")
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	_, fx := exampleArgs("server")
	fixtures, _ := json.Marshal(fx)
	fxPath := filepath.Join(dir, "fixtures.json")
	if err := os.WriteFile(fxPath, fixtures, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	args := append([]string{"-instances", "1", "-port", "0", "-fixtures", fxPath,
		"-postgres", dsn, "-schema", schema, "-redis", cfg.redis, "-prefix", prefix}, extra...)
	s.cmd = exec.Command(filepath.Join(dir, "distributed"), args...)
	return s.runExample(dir, "Instance 1 listening on ", func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, cfg.postgres); err == nil {
			conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
		rc := goredis.NewClient(redisOptions(cfg.redis))
		it := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			rc.Unlink(ctx, it.Val())
		}
		rc.Close()
	})
}

// withApplicationName returns the PostgreSQL connection string dsn (a URL or
// keyword=value pairs) with the application_name name.
func withApplicationName(dsn, name string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " application_name=" + name, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("-postgres: %w", err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
