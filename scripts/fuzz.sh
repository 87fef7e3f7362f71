#!/usr/bin/env bash
# fuzz.sh runs every native Go fuzz target (func FuzzXxx in a _test.go file) of every module
# for FUZZTIME each: 3s by default, `make fuzz` 60s; scripts/test.sh's short form runs
# FUZZ_SAMPLE=4 of them for 2s.
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
# Every target as "<module dir> <package> <target>", read from the test files (func FuzzXxx(f
# *testing.F)) without compiling anything.
targets=()
while read -r dir; do
	while IFS=: read -r file decl; do
		pkg=$(cd "$dir" && go list "./$(dirname "$file")")
		name=${decl#func }
		targets+=("$dir $pkg ${name%%(*}")
	done < <(cd "$dir" && grep -rE --include='*_test.go' --exclude-dir=testdata '^func Fuzz[A-Za-z0-9_]*\(' . | sed 's|^\./||' | sort)
done < <(go list -m -f '{{.Dir}}')
# FUZZ_SAMPLE=n fuzzes n of them (the short form in make test): a different n each day, in
# turn, so every target is fuzzed every few days; FUZZ_OFFSET picks the turn (the day of the
# year by default, printed so a failure can be run again). Their seed corpora run in every
# go test regardless.
sample=${FUZZ_SAMPLE:-${#targets[@]}}
offset=${FUZZ_OFFSET:-$((10#$(date +%j)))}
if ((sample < ${#targets[@]})); then
	echo "fuzz: $sample of ${#targets[@]} targets, turn FUZZ_OFFSET=$offset"
fi
ran=0
failed=()
for ((i = 0; i < sample && i < ${#targets[@]}; i++)); do
	read -r dir pkg target <<<"${targets[$(((offset * sample + i) % ${#targets[@]}))]}"
	echo "fuzz $pkg $target for $fuzztime"
	ran=$((ran + 1))
	if ! fuzz_one "$dir" "$pkg" "$target"; then
		failed+=("$pkg $target")
	fi
done
echo "fuzz: $ran targets, ${fuzztime} each, in $((SECONDS - start))s"
if ((${#failed[@]} > 0)); then
	printf 'fuzz: FAILED %s (the failing input is in its testdata/fuzz/)\n' "${failed[@]}" >&2
	exit 1
fi
