#!/usr/bin/env bash
# The one gate: formatting, module hygiene (go mod tidy, go mod verify), vet, staticcheck,
# govulncheck (hack/vulncheck.sh), the committed-artefact drift check, the unit tests with the
# race detector (golden files, schema agreement, the trust-zone deptests, the README's and
# docs/cli.md's examples and the docs' link check are among them), and a report of each
# component's size. Needs no Docker and no root.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

# pkgs are the module's packages that hold a tracked Go file, never ./... alone: a folder git
# ignores (./workspace, where `sharness-ai run` puts the agent's workspace by default) may hold
# Go files the agent wrote, and `go test ./...` would build and run them here, as this user.
mapfile -t pkgs < <(comm -12 <(go list -f '{{.Dir}}' ./... | sed "s#^$PWD#.#" | sort -u) \
  <(git ls-files '*.go' | xargs -r -n1 dirname | sed 's#^#./#; s#^\./\.$#.#' | sort -u))
[ ${#pkgs[@]} -gt 0 ] || { echo "check: no tracked Go package found (not a git checkout?)"; exit 1; }

step gofmt
unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go mod tidy -diff (every direct import required directly, no stale sums)"
go mod tidy -diff

step "go mod verify"
go mod verify

step go vet
go vet "${pkgs[@]}"

step staticcheck
go tool staticcheck "${pkgs[@]}"

step govulncheck
hack/vulncheck.sh

step "compile --check (committed docker-compose.yml and compiled/ match the default manifest)"
go run ./cmd/sharness-ai compile --check

step "go test -race"
go test -race -count=1 "${pkgs[@]}"

# Size is a prompt to look at a design, never a gate: a number here fails nothing. Each row is a
# whole subtree (a component with its packages), non-test and non-comment Go lines.
step "size report (non-test, non-comment Go lines per subtree; a prompt, not a gate)"
for d in images/*/ host/*/ internal/*/ policies/*/ compose/ cmd/*/ testkit/*/; do
  [ -d "$d" ] || continue
  n=$(find "$d" -name '*.go' ! -name '*_test.go' -print0 | xargs -0 -r cat | grep -cvE '^\s*(//|$)' || true)
  [ "$n" -eq 0 ] && continue
  printf '%-28s %5d\n' "$d" "$n"
done

step "check passed"
