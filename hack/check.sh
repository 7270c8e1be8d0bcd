#!/usr/bin/env bash
# The one gate: formatting, vet, staticcheck, the unit tests with the race detector (golden files,
# schema agreement, the committed-artefact drift check and the README examples are among them),
# and the component size budget. Needs no Docker and no root.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step gofmt
unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step go vet
go vet ./...

step staticcheck
go tool staticcheck ./...

step "compile --check (committed docker-compose.yml and compiled/ match the default manifest)"
go run ./cmd/sharness-ai compile --check

step "go test -race"
go test -race -count=1 ./...

step "size budget (non-test, non-comment Go lines per component; aim <= 300, fail > 450)"
fail=0
for d in images/*/ internal/*/ policies/*/ compose/ runtime/*/; do
  [ -d "$d" ] || continue
  n=$(find "$d" -maxdepth 1 -name '*.go' ! -name '*_test.go' -print0 | xargs -0 -r cat | grep -cvE '^\s*(//|$)' || true)
  [ "$n" -eq 0 ] && continue
  flag=""
  [ "$n" -gt 300 ] && flag="  (over the 300-line aim)"
  [ "$n" -gt 450 ] && { flag="  (over 450: split it)"; fail=1; }
  printf '%-28s %4d%s\n' "$d" "$n" "$flag"
done
[ "$fail" -eq 0 ]

step "check passed"
