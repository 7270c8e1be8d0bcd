#!/usr/bin/env bash
# vulncheck.sh: govulncheck over the whole module, against a copy of the Go vulnerability
# database made on this machine.
#
# Usage: hack/vulncheck.sh
#
# The database's own host cannot be reached where we build; the Go module proxy serves the
# database's source repository (golang.org/x/vulndb, its OSV files under data/osv) as a module.
# Its indexdb command lays those files out as the database govulncheck reads with -db file://.
# Both are pinned here, so a run is repeatable; raise SHARNESS_VULNDB_VERSION (a pseudo-version
# of golang.org/x/vulndb, or "latest") to see newer reports. The database is cached per version
# under SHARNESS_VULNDB_CACHE (default ~/.cache/sharness-ai/vulndb).
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."

VULNDB_VERSION=${SHARNESS_VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.9.0
CACHE=${SHARNESS_VULNDB_CACHE:-$HOME/.cache/sharness-ai/vulndb}

src=$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src/data/osv" ] || { echo "vulncheck: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv" >&2; exit 1; }
db=$CACHE/$(basename "$src")
if [ ! -f "$db/index/db.json" ]; then
	echo "vulncheck: indexing $(find "$src/data/osv" -name '*.json' | wc -l) reports of $(basename "$src")" >&2
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.new.XXXXXX")
	(cd "$src" && GOFLAGS=-mod=mod go run ./cmd/indexdb -vulns data/osv -out "$tmp/db") >"$tmp/log" 2>&1 ||
		{ cat "$tmp/log" >&2; rm -rf "$tmp"; exit 1; }
	mv "$tmp/db" "$db" && rm -rf "$tmp"
fi
echo "vulncheck: database $(basename "$src"), $(go env GOVERSION)" >&2
go run "$GOVULNCHECK" -db "file://$db" ./...
