#!/usr/bin/env bash
# rules.sh checks the alerts and the dashboard: every metric they name is in the catalogue
# (tools/cmd/obscheck), promtool parses every alert and dashboard query, and the alerts' unit
# tests pass (deploy/prometheus/alerts_test.yml). promtool comes from PATH, or .run/bin, or is
# taken from Debian's prometheus package (apt-get download, no install, no daemon). Without it
# this step says SKIPPED and why — and fails instead when REQUIRE_PROMTOOL=1 (CI).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .run/bin
queries=$(mktemp)
trap 'rm -f "$queries"' EXIT
go run ./tools/cmd/obscheck -root . -queries "$queries"

promtool=$(command -v promtool || true)
if [ -z "$promtool" ] && [ -x .run/bin/promtool ]; then
	promtool=.run/bin/promtool
fi
if [ -z "$promtool" ] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
	cache=$(mktemp -d)
	if (cd "$cache" && apt-get download -q prometheus >/dev/null 2>&1) && dpkg-deb -x "$cache"/prometheus_*.deb "$cache/x"; then
		cp "$cache/x/usr/bin/promtool" .run/bin/promtool
		promtool=.run/bin/promtool
	fi
	rm -rf "$cache"
fi
if [ -z "$promtool" ]; then
	msg="promtool not found (install Debian's prometheus package, or put promtool on PATH): alert rules NOT checked"
	if [ "${REQUIRE_PROMTOOL:-0}" = 1 ]; then
		echo "rules: $msg" >&2
		exit 1
	fi
	echo "rules: SKIPPED — $msg" >&2
	exit 0
fi
promtool=$(realpath "$promtool")
"$promtool" check rules deploy/prometheus/alerts.yml "$queries"
(cd deploy/prometheus && "$promtool" test rules alerts_test.yml)
