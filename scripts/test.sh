#!/usr/bin/env bash
# test.sh runs the whole test suite: vet, then every package of every module with the race
# detector, against a real PostgreSQL (DATABASE_URL, or a throwaway cluster: stockflow pg)
# and real NATS servers the tests start themselves (embedded, or the pinned binary).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
DATABASE_URL=$(go run ./tools/cmd/stockflow pg)
export DATABASE_URL
mapfile -t mods < <(go list -m -f '{{.Dir}}' | sed "s#^$root/##")
pkgs=()
for m in "${mods[@]}"; do pkgs+=("./$m/..."); done
echo "go vet ${pkgs[*]}"
go vet "${pkgs[@]}"
echo "go test -race ${pkgs[*]}"
go test -race -count=1 -timeout 20m "$@" "${pkgs[@]}"
# The alerts and the dashboard against the metric catalogue, and the alerts' unit tests.
scripts/rules.sh
# Then every fuzz target briefly (their seed corpora already ran above, as regression tests).
FUZZTIME=${FUZZTIME:-2s} scripts/fuzz.sh
