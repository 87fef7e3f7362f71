#!/usr/bin/env bash
# test.sh runs the whole test suite: vet, then every package of every module with the race
# detector, against a real PostgreSQL (DATABASE_URL, or a throwaway cluster: stockflow pg)
# and real NATS servers the tests start themselves (embedded, or the pinned binary).
#
# Each module (every `use` of go.work, so a new one is included) is vetted and tested on its
# own with GOWORK=off: from its own go.mod and go.sum, the way a team builds it to release it
# alone. The suite therefore proves every module builds and passes by itself; a go.sum that
# only works inside the workspace fails here. The test binaries themselves run with GOWORK
# as the caller has it (-exec env -u GOWORK): the e2e tests and the launcher build the whole
# system from the repository, which is the workspace's job.
# One module failing does not stop the others: every failing module is listed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
DATABASE_URL=$(go run ./tools/cmd/stockflow pg)
export DATABASE_URL
mapfile -t mods < <(go list -m -f '{{.Dir}}' | sed "s#^$root/##")
failed=()
for m in "${mods[@]}"; do
	echo "== $m: go vet, go test -race (GOWORK=off)"
	start=$SECONDS
	if ! (cd "$root/$m" &&
		GOWORK=off go vet ./... &&
		GOWORK=off go test -race -count=1 -timeout 20m -exec 'env -u GOWORK' "$@" ./...); then
		failed+=("$m")
	fi
	echo "== $m: $((SECONDS - start))s"
done
if ((${#failed[@]} > 0)); then
	printf 'test: FAILED in module %s\n' "${failed[@]}" >&2
	exit 1
fi
# The alerts and the dashboard against the metric catalogue, and the alerts' unit tests.
scripts/rules.sh
# Then a few fuzz targets briefly, a different few each day (their seed corpora all ran above,
# as regression tests); make fuzz runs them all.
FUZZTIME=${FUZZTIME:-2s} FUZZ_SAMPLE=${FUZZ_SAMPLE:-4} scripts/fuzz.sh
