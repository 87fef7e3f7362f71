#!/usr/bin/env bash
# fuzz.sh runs every native Go fuzz target (func FuzzXxx in a _test.go file) of every module
# for FUZZTIME each: 3s by default (the short form scripts/test.sh runs), `make fuzz` 60s.
# go test -fuzz takes one package and one target at a time, so each target runs on its own.
# An input that fails is written to the package's testdata/fuzz/FuzzXxx/: commit it, fix the
# code, and from then on every go test runs it as a regression case (with the seed corpus).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fuzztime=${FUZZTIME:-3s}
start=$SECONDS

# fuzz_one runs one target. Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" at the -fuzztime boundary when a worker is starved of CPU (go.dev/issue/75804,
# fixed in Go 1.27): nothing was found and no input written. That, and only that, is run once more;
# a failing input, a panic or a second deadline fails the target.
fuzz_one() {
	local dir=$1 pkg=$2 target=$3 out
	for try in 1 2; do
		out=$(mktemp)
		if (cd "$dir" && go test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "$pkg") 2>&1 | tee "$out"; then
			rm -f "$out"
			return 0
		fi
		if ((try == 1)) && grep -q 'context deadline exceeded' "$out" && ! grep -qE 'Failing input written|panic:' "$out"; then
			echo "fuzz: $target hit the -fuzztime boundary race (go.dev/issue/75804) with nothing found; once more"
			rm -f "$out"
			continue
		fi
		rm -f "$out"
		return 1
	done
}
ran=0
failed=()
while read -r dir; do
	# Only packages whose tests declare a fuzz target are compiled; go test -list names the
	# targets (one line each, then "ok <package>"), for all of a module's packages at once.
	mapfile -t pkgs < <(cd "$dir" && grep -rlE --include='*_test.go' --exclude-dir=testdata '^func Fuzz[A-Z0-9_]' . |
		xargs -r -n1 dirname | sort -u)
	((${#pkgs[@]} > 0)) || continue
	mapfile -t lists < <(cd "$dir" && go test -list '^Fuzz' "${pkgs[@]}" |
		awk '/^Fuzz/ { names = names " " $1; next } /^ok / { if (names != "") print $2 names; names = "" }')
	for list in "${lists[@]}"; do
		read -r pkg targets <<<"$list"
		for target in $targets; do
			echo "fuzz $pkg $target for $fuzztime"
			ran=$((ran + 1))
			if ! fuzz_one "$dir" "$pkg" "$target"; then
				failed+=("$pkg $target")
			fi
		done
	done
done < <(go list -m -f '{{.Dir}}')
echo "fuzz: $ran targets, ${fuzztime} each, in $((SECONDS - start))s"
if ((${#failed[@]} > 0)); then
	printf 'fuzz: FAILED %s (the failing input is in its testdata/fuzz/)\n' "${failed[@]}" >&2
	exit 1
fi
