#!/usr/bin/env bash
# e2e.sh: run the end-to-end tests on a real Docker engine.
#
# Usage: hack/e2e.sh [go test flags...]   e.g. hack/e2e.sh -run TestWall
#        SHARNESS_ENGINE=current hack/e2e.sh   on the current engine (docs/engines.md)
#
# SHARNESS_ENGINE (debian, the default, or current) picks the engine hack/engine.sh installs and
# starts; a running engine is used only if it is that one. With SHARNESS_E2E_DOORS=FILE the suite
# appends every door's and check's outcome to FILE (hack/doors.sh diff compares two runs).
#
# Installs what is missing (hack/engine.sh install) and the runtime shim (hack/runtime.sh), starts
# the engine if none answers (with the shim registered and as its default runtime), builds the
# images, installs the compiled policies the shim checks (sharness-ai install, for the default and
# the offline world's policy), runs
# `go test -tags e2e ./e2e/...`, and on exit stops the engine only if this run started it.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENGINE=$ROOT/hack/engine.sh

"$ENGINE" install
# Debian's chromium: e2e/dashboard_test.go drives it headless.
if ! command -v chromium >/dev/null 2>&1; then
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
# Before the engine starts: dockerd registers the installed binary (and refuses to start without it).
"$ROOT/hack/runtime.sh" install >/dev/null
if docker info >/dev/null 2>&1; then
	running=$("$ENGINE" running)
	if [ -n "$running" ] && [ "$running" != "${SHARNESS_ENGINE:-debian}" ]; then
		echo "e2e: SHARNESS_ENGINE=${SHARNESS_ENGINE:-debian}, but the running engine is the $running one" >&2
		exit 1
	fi
	echo "e2e: using the running engine ($running); it stays up" >&2
else
	"$ENGINE" start
	# A failed stop (containers of other sessions still running) leaves the engine up, and says so.
	trap '"$ENGINE" stop || true' EXIT
fi
"$ROOT/hack/build-images.sh"
cd "$ROOT"
# The compiled policies the shim checks every SHarness container against: the offline world's
# (policies/world, which the suite's stack runs, with its fixtures.json) and the default one
# (which the suite runs without the world, and under which it shows the test switches refused).
go run ./cmd/sharness-ai compile --check
go run ./cmd/sharness-ai -f policies/world/manifest.yaml compile -o compose/world --check
go run ./cmd/sharness-ai install --replace
go run ./cmd/sharness-ai -f policies/world/manifest.yaml install --replace
go test -tags e2e -count=1 -timeout 75m -v "$@" ./e2e/...
