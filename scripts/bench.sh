#!/usr/bin/env bash
# bench.sh runs the stock service's lock benchmarks (naive conditional update vs the engine,
# one hot SKU and a Zipf mix) against a real PostgreSQL (DATABASE_URL, or a throwaway cluster:
# stockflow pg), keeps the raw output in .run/bench.txt and prints benchreport's summary.
# BENCHTIME (default 5000x) and COUNT (default 5) size the run; extra arguments go to go test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
DATABASE_URL=$(go run ./tools/cmd/stockflow pg)
export DATABASE_URL
mkdir -p .run/bin
# Built first, so compiling it does not take CPU from the first benchmark.
go build -o .run/bin/benchreport ./tools/cmd/benchreport
go test -run '^$' -bench 'LockHotSKU|LockZipf' -benchtime "${BENCHTIME:-5000x}" -count "${COUNT:-5}" -timeout 60m "$@" \
	./services/stock/internal/app/ | tee .run/bench.txt | .run/bin/benchreport
