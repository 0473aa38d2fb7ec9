#!/usr/bin/env bash
# Runs the whole test suite: formatting, vet, staticcheck, and every Go test with the race
# detector, including the ones that drive npm tools and the PostgreSQL and Redis stores.
# It installs what it needs (Go modules, the pinned npm tools into tools/npm/node_modules,
# the Debian packages of the client packages' toolchains when they are missing) and
# starts PostgreSQL and Redis if they are stopped. With CI=true, a test that would skip
# for want of a tool or a server fails instead, and so does the run if anything skipped.
#
# Full and fast runs: a plain `go test ./...` is the developer's fast default (a few
# minutes): it skips the slow tests, each saying so (testenv.SkipUnlessFull in
# internal/testenv): the generated client packages built and run with the toolchains
# of the languages other than Go, instances run as processes and killed with kill -9,
# database servers stopped under load, Redis Clusters failed over or resharded, the
# PostgreSQL suites repeated behind PgBouncer and with each option, the memory stores
# filled with 100,000 accounts rather than 10,000. TOLLGATE_TEST_FULL=1 runs them, and
# CI=true always does. This script sets TOLLGATE_TEST_FULL=1 unless it is set:
# `TOLLGATE_TEST_FULL=0 scripts/test.sh` runs the fast selection, with the npm tools and
# the servers.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

say() { printf '==> %s\n' "$*"; }

say "Go modules"
go mod download

say "npm tools (tools/npm)"
if command -v npm >/dev/null; then
  (cd tools/npm && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  # The dashboard's third-party UI pieces: a test rebuilds them and compares with the
  # committed bundles.
  (cd tools/dashboard-assets && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  export TOLLGATE_NODE_TOOLS="$root/tools/npm"
else
  say "npm is not installed: tests that need npm tools will skip (or fail under CI=true)"
fi

say "Debian packages (the toolchains the generated client packages are tested with, the dashboard's browser, the pooler the PostgreSQL store is tested behind, the Redis the tests start clusters of, and the Prometheus that scrapes the example server's metrics)"
# Each entry: a package, and a command or file whose absence means it must be installed.
debian=(
  "default-jdk-headless:javac"
  "libjackson2-databind-java:/usr/share/java/jackson-databind.jar"
  "mono-mcs:mcs"
  "mono-runtime:mono"
  "libmono-system-net-http4.0-cil:/usr/lib/mono/4.5/System.Net.Http.dll"
  "libnewtonsoft-json-cil-dev:/usr/lib/mono/gac/Newtonsoft.Json"
  "php-cli:php"
  "php-curl:/usr/share/doc/php-curl"
  "composer:composer"
  "chromium:chromium"
  "pgbouncer:/usr/sbin/pgbouncer"
  "redis-server:redis-server"
  "prometheus:prometheus"
)
missing=()
for entry in "${debian[@]}"; do
  pkg=${entry%%:*} probe=${entry#*:}
  if [[ $probe == /* ]]; then [ -e "$probe" ] || missing+=("$pkg"); else command -v "$probe" >/dev/null || missing+=("$pkg"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "apt-get is not usable here: tests that need ${missing[*]} will skip (or fail under CI=true)"
  fi
fi

say "PostgreSQL and Redis"
if command -v pg_isready >/dev/null; then
  if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
  fi
  pg_isready -h 127.0.0.1 -p 5432 -q && export TOLLGATE_TEST_POSTGRES="${TOLLGATE_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
fi
if command -v redis-cli >/dev/null; then
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    say "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
    for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
  fi
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && export TOLLGATE_TEST_REDIS="${TOLLGATE_TEST_REDIS:-127.0.0.1:6379}"
fi

say "gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './tools/*' -not -path './.cache/*') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "not formatted:"; echo "$unformatted"; exit 1
fi

say "go vet"
go vet ./...

say "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

say "go test -race"
export TOLLGATE_TEST_FULL="${TOLLGATE_TEST_FULL:-1}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# go test stops a package's tests after 10 minutes by default; on a loaded machine with
# the race detector, internal/multiinstance (instances as processes on PostgreSQL and
# Redis) and store/postgres (its conformance suites directly and again through PgBouncer)
# take longer: store/postgres took 19 minutes on the 2-core machine CI runs on, and
# over 30 with a build running beside it.
go test -race -count=1 -timeout 50m -json ./... >"$log"
status=$?
set -e
# Print the failures and skips readably; the full log is in JSON.
go run ./internal/cmd/testreport <"$log" || status=1
exit $status
