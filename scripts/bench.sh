#!/usr/bin/env bash
# bench.sh runs the stock service's lock benchmarks (naive conditional update vs the engine,
# one hot SKU and a Zipf mix) against a real PostgreSQL (DATABASE_URL, or a throwaway cluster:
# stockflow pg), keeps the raw output in .run/bench.txt and prints benchreport's summary.
# BENCHTIME (default 5000x) and COUNT (default 5) size the run; extra arguments go to go test.
#
# The paths are interleaved: COUNT rounds, each one go test per clients value that runs naive,
# engine and engine-4slots back to back in one process against the same server, so a ratio's
# two sides see the same machine (shared cores drift over minutes) and benchreport pairs them
# by round for the ratio's spread. A -cpuprofile is then the last go test's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
DATABASE_URL=$(go run ./tools/cmd/stockflow pg)
export DATABASE_URL
mkdir -p .run/bin
# Built first, so compiling it does not take CPU from the first benchmark.
go build -o .run/bin/benchreport ./tools/cmd/benchreport
bench() {
	go test -run '^$' -bench "$1" -benchtime "${BENCHTIME:-5000x}" -count 1 -timeout 60m "${@:2}" \
		./services/stock/internal/app/
}
for round in $(seq "${COUNT:-5}"); do
	echo "# round $round"
	for clients in 1 8 64 256; do
		bench "^BenchmarkLockHotSKU\$/^(naive|engine|engine-4slots)\$/^clients=$clients\$" "$@"
	done
	bench '^BenchmarkLockZipf$' "$@"
done | tee .run/bench.txt | .run/bin/benchreport
