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

step "size budget (non-test, non-comment Go lines; components in images/ aim <= 300 and fail > 450; libraries aim <= 400)"
fail=0
for d in images/*/ internal/*/ internal/*/*/ policies/*/ compose/; do
  [ -d "$d" ] || continue
  n=$(find "$d" -maxdepth 1 -name '*.go' ! -name '*_test.go' -print0 | xargs -0 -r cat | grep -cvE '^\s*(//|$)' || true)
  [ "$n" -eq 0 ] && continue
  aim=400
  case $d in images/*) aim=300 ;; esac
  flag=""
  [ "$n" -gt "$aim" ] && flag="  (over the $aim-line aim)"
  case $d in images/*) [ "$n" -gt 450 ] && { flag="  (over 450: split it)"; fail=1; } ;; esac
  printf '%-28s %4d%s\n' "$d" "$n" "$flag"
done
[ "$fail" -eq 0 ]

step "check passed"
