#!/bin/sh
# Compares examples/distributed (keys and credits in PostgreSQL, limits in Redis) with
# a Tyk OSS gateway in front of the same API, on this machine, in alternating rounds,
# and prints each round's calls per second, the ratio distributed/tyk (median, min,
# max) and the CPU per call of every process: the gateway, its upstream, Redis, the
# instance, PostgreSQL. Outside CI: it needs wrk, redis-server, a PostgreSQL and Go; it
# builds both, Tyk from its source.
#
#   scripts/compare-gateway.sh [restbench flags...]
#
# TYK_BIN      a Tyk gateway binary to use instead of building one
# TYK_SRC      a checkout of Tyk OSS gateway's source to build it from; unset (and
#              TYK_BIN unset), the script clones the v5.14.0 tag from GitHub into
#              $TYK_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/tyk-v5.14.0)
#              once, and builds it there
# ROUNDS       rounds (default 5); DURATION, each drive (default 10s)
# POSTGRES     the PostgreSQL of examples/distributed (default
#              $TOLLGATE_TEST_POSTGRES, else postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
# REDIS        a Redis host:port both use; by default a private redis-server on a free
#              port, started and stopped here
#
# The gateway runs with the settings of Tyk's example configuration (tyk.conf.example);
# restbench writes its configuration, API definition and policy into a temporary
# directory and creates its key through its admin API (internal/cmd/restbench, the tyk
# server). Further arguments go to restbench: -tyk-redis-limiter keeps the gateway's
# rate limits in Redis, -c and -t set wrk's connections and threads.
set -eu

for tool in wrk go; do
	command -v "$tool" >/dev/null || { echo "compare-gateway: $tool is not on PATH" >&2; exit 2; }
done
cd "$(dirname "$0")/.."

built_tyk=
if [ -n "${TYK_BIN:-}" ]; then
	[ -x "$TYK_BIN" ] || { echo "compare-gateway: TYK_BIN '$TYK_BIN' is not an executable" >&2; exit 2; }
else
	if [ -z "${TYK_SRC:-}" ]; then
		TYK_SRC=${TYK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tollgate/tyk-v5.14.0}
		if [ ! -f "$TYK_SRC/go.mod" ]; then
			command -v git >/dev/null || { echo "compare-gateway: git is not on PATH (or set TYK_SRC or TYK_BIN)" >&2; exit 2; }
			echo "compare-gateway: cloning Tyk OSS gateway v5.14.0 into $TYK_SRC"
			mkdir -p "$(dirname "$TYK_SRC")"
			git clone --quiet --depth 1 --branch v5.14.0 https://github.com/TykTechnologies/tyk.git "$TYK_SRC"
		fi
	fi
	[ -f "$TYK_SRC/go.mod" ] || { echo "compare-gateway: TYK_SRC '$TYK_SRC' holds no Go module" >&2; exit 2; }
	TYK_BIN=${TMPDIR:-/tmp}/compare-gateway-tyk
	built_tyk=$TYK_BIN
	echo "compare-gateway: building the gateway in $TYK_SRC (the first build takes minutes)"
	(cd "$TYK_SRC" && go build -o "$TYK_BIN" .)
fi
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
POSTGRES=${POSTGRES:-${TOLLGATE_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}

if [ -z "${REDIS:-}" ]; then
	command -v redis-server >/dev/null || { echo "compare-gateway: redis-server is not on PATH (or set REDIS)" >&2; exit 2; }
	dir=$(mktemp -d)
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
	trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; rm -rf "$dir"' EXIT INT TERM
	i=0
	until redis-cli -p "$port" ping >/dev/null 2>&1; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || { echo "compare-gateway: redis-server did not start:" >&2; cat "$dir/redis.log" >&2; exit 1; }
		sleep 0.1
	done
	REDIS=127.0.0.1:$port
fi

echo "gateway: $("$TYK_BIN" --version 2>&1 | head -n 1); Redis $REDIS; PostgreSQL $(echo "$POSTGRES" | sed 's|//[^@]*@|//|')"
go build -o "${TMPDIR:-/tmp}/compare-gateway-restbench" ./internal/cmd/restbench
exec_status=0
"${TMPDIR:-/tmp}/compare-gateway-restbench" -compare tyk,distributed -rounds "$ROUNDS" -d "$DURATION" \
	-tyk "$TYK_BIN" -redis "$REDIS" -postgres "$POSTGRES" "$@" || exec_status=$?
rm -f "${TMPDIR:-/tmp}/compare-gateway-restbench" ${built_tyk:+"$built_tyk"}
exit "$exec_status"
