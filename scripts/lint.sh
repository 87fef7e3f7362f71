#!/usr/bin/env bash
# lint.sh checks every package of every workspace module: gofmt, go vet, staticcheck (pinned, from the
# Go module proxy) and the import direction of the layers (tools/cmd/importcheck).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mapfile -t mods < <(go list -m -f '{{.Dir}}' | sed "s#^$root/##")
pkgs=()
for m in "${mods[@]}"; do pkgs+=("./$m/..."); done
echo "gofmt"
unformatted=$(gofmt -l "${mods[@]}")
if [ -n "$unformatted" ]; then
	echo "not gofmt'ed:" $unformatted >&2
	exit 1
fi
echo "go vet"
go vet "${pkgs[@]}"
echo "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 "${pkgs[@]}"
echo "importcheck"
go run ./tools/cmd/importcheck "${pkgs[@]}"
