#!/usr/bin/env bash
# dev.sh brings up what stockflow needs on one machine and takes it down again.
#
#   scripts/dev.sh pg      ensure a PostgreSQL; print its DATABASE_URL
#   scripts/dev.sh nats    ensure the project's pinned nats-server (>= 2.12); print its NATS_URL
#   scripts/dev.sh up      pg + nats + the four services, each a process with its log in .run/logs
#   scripts/dev.sh down    stop exactly what up started (pid files under .run/), nothing else
#   scripts/dev.sh status  what runs
#
# DATABASE_URL / NATS_URL are used when set and reachable. Otherwise a throwaway PostgreSQL
# cluster (initdb/pg_ctl from Debian's postgresql package) and the pinned nats-server run
# under the git-ignored .run/ folder, on ports that do not clash with the machine's servers.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
run="$root/.run"
mkdir -p "$run/logs" "$run/bin" "$run/pids"

PG_PORT=${STOCKFLOW_PG_PORT:-15432}
NATS_PORT=${STOCKFLOW_NATS_PORT:-14222}
SERVICES=(stock order payment-adapter timeout)
declare -A PORT=([order]=8081 [stock]=8082 [payment-adapter]=8083 [timeout]=8084)
declare -A DB=([order]=stockflow_order [stock]=stockflow_stock [payment-adapter]=stockflow_payment [timeout]=stockflow_timeout)

say() { printf '%s\n' "$*" >&2; }

pg_bin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && { echo "$d"; return 0; }
	done
	command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
	return 1
}

pg_reachable() { # url
	local bin
	bin=$(pg_bin 2>/dev/null) || bin=""
	if [ -n "$bin" ] && [ -x "$bin/psql" ]; then
		"$bin/psql" "$1" -Atqc 'select 1' >/dev/null 2>&1
	elif command -v psql >/dev/null 2>&1; then
		psql "$1" -Atqc 'select 1' >/dev/null 2>&1
	else
		return 1
	fi
}

# ensure_pg prints a server URL (database postgres) for a PostgreSQL that answers.
ensure_pg() {
	if [ -n "${DATABASE_URL:-}" ]; then
		if pg_reachable "$DATABASE_URL"; then echo "$DATABASE_URL"; return; fi
		say "DATABASE_URL is set but does not answer; starting a throwaway cluster instead"
	fi
	local own="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
	if pg_reachable "$own"; then echo "$own"; return; fi
	local bin
	if ! bin=$(pg_bin); then
		say "PostgreSQL binaries (initdb, pg_ctl) not found: install Debian's 'postgresql' package"
		say "(apt-get install postgresql) or set DATABASE_URL to a reachable server."
		exit 1
	fi
	local data="$run/pg"
	if [ ! -f "$data/PG_VERSION" ]; then
		say "initdb $data"
		mkdir -p "$data"
		local as=()
		if [ "$(id -u)" = 0 ]; then # initdb refuses root: the cluster belongs to the postgres user
			chown postgres "$run" "$data" "$run/logs"
			as=(runuser -u postgres --)
		fi
		"${as[@]}" "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >"$run/logs/initdb.log" 2>&1
	fi
	local as=()
	if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); fi
	"${as[@]}" "$bin/pg_ctl" -D "$data" -l "$run/logs/postgres.log" -w -t 60 \
		-o "-p $PG_PORT -k $data -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on" start >/dev/null
	echo "$data" >"$run/pids/pg.data"
	echo "$own"
}

nats_binary() {
	if [ ! -x "$run/bin/nats-server" ] || [ "$root/pkg/go.mod" -nt "$run/bin/nats-server" ]; then
		say "building the pinned nats-server (pkg/go.mod)"
		(cd "$root/pkg" && go build -o "$run/bin/nats-server" github.com/nats-io/nats-server/v2)
	fi
	echo "$run/bin/nats-server"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ensure_nats() {
	if [ -n "${NATS_URL:-}" ]; then echo "$NATS_URL"; return; fi
	local url="nats://127.0.0.1:$NATS_PORT"
	if port_open "$NATS_PORT"; then echo "$url"; return; fi
	local bin
	bin=$(nats_binary)
	mkdir -p "$run/nats"
	"$bin" -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$run/nats" -n stockflow-dev >"$run/logs/nats.log" 2>&1 &
	echo $! >"$run/pids/nats.pid"
	for _ in $(seq 1 100); do port_open "$NATS_PORT" && break; sleep 0.1; done
	port_open "$NATS_PORT" || { say "nats-server did not start: see $run/logs/nats.log"; exit 1; }
	echo "$url"
}

with_db() { # server-url db-name
	local u=$1 name=$2
	echo "${u%/*}/$name${u##*/postgres}"
}

build_services() {
	say "building services"
	local s
	for s in "${SERVICES[@]}"; do
		(cd "$root" && go build -o "$run/bin/$s" "./services/$s/cmd/$s")
	done
}

up() {
	local pg nats
	pg=$(ensure_pg)
	nats=$(ensure_nats)
	build_services
	local s
	for s in "${SERVICES[@]}"; do
		if [ -f "$run/pids/$s.pid" ] && kill -0 "$(cat "$run/pids/$s.pid")" 2>/dev/null; then continue; fi
		HTTP_ADDR="127.0.0.1:${PORT[$s]}" DATABASE_URL="$(with_db "$pg" "${DB[$s]}")" NATS_URL="$nats" \
			PAYMENT_SANDBOX_SECRET="${PAYMENT_SANDBOX_SECRET:-sandbox-secret}" \
			"$run/bin/$s" serve >"$run/logs/$s.log" 2>&1 &
		echo $! >"$run/pids/$s.pid"
	done
	for s in "${SERVICES[@]}"; do
		local ok=""
		for _ in $(seq 1 300); do
			if curl -fsS "http://127.0.0.1:${PORT[$s]}/readyz" >/dev/null 2>&1; then ok=1; break; fi
			kill -0 "$(cat "$run/pids/$s.pid")" 2>/dev/null || break
			sleep 0.1
		done
		[ -n "$ok" ] || { say "$s did not become ready: tail $run/logs/$s.log"; tail -20 "$run/logs/$s.log" >&2; exit 1; }
	done
	echo "$pg" >"$run/database_url"
	echo "$nats" >"$run/nats_url"
	cat <<MSG
stockflow is up.
  order            http://127.0.0.1:${PORT[order]}
  stock            http://127.0.0.1:${PORT[stock]}
  payment-adapter  http://127.0.0.1:${PORT[payment-adapter]}
  timeout          http://127.0.0.1:${PORT[timeout]}
  PostgreSQL       $pg
  NATS             $nats
  logs             $run/logs/
MSG
}

down() {
	local f pid
	for f in "$run"/pids/*.pid; do
		[ -e "$f" ] || continue
		pid=$(cat "$f")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$f"
	done
	if [ -f "$run/pids/pg.data" ]; then
		local bin as=()
		bin=$(pg_bin)
		if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); fi
		"${as[@]}" "$bin/pg_ctl" -D "$(cat "$run/pids/pg.data")" -m fast -w stop >/dev/null 2>&1 || true
		rm -f "$run/pids/pg.data"
	fi
	say "stockflow is down."
}

status() {
	local f
	for f in "$run"/pids/*.pid; do
		[ -e "$f" ] || continue
		if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$(basename "$f" .pid): running (pid $(cat "$f"))"; else echo "$(basename "$f" .pid): dead"; fi
	done
	[ -f "$run/pids/pg.data" ] && echo "postgres: $(cat "$run/pids/pg.data")"
	return 0
}

case "${1:-}" in
	pg) ensure_pg ;;
	nats) ensure_nats ;;
	up) up ;;
	down) down ;;
	status) status ;;
	*) say "usage: $0 pg|nats|up|down|status"; exit 2 ;;
esac
