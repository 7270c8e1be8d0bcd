#!/usr/bin/env bash
# e2e.sh: run the end-to-end tests on a real Docker engine.
#
# Usage: hack/e2e.sh [go test flags...]   e.g. hack/e2e.sh -run TestWall
#
# Installs what is missing (hack/engine.sh install), starts the engine if none answers, builds the
# images, installs the runtime shim (hack/runtime.sh) and the compiled policies it checks
# (sharness-ai install), runs `go test -tags e2e ./e2e/...`, and on exit stops the engine only if this run
# started it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENGINE=$ROOT/hack/engine.sh

"$ENGINE" install
if docker info >/dev/null 2>&1; then
	echo "e2e: using the running engine; it stays up" >&2
else
	"$ENGINE" start
	# A failed stop (containers of other sessions still running) leaves the engine up, and says so.
	trap '"$ENGINE" stop || true' EXIT
fi
"$ROOT/hack/build-images.sh"
# The runtime shim and the compiled policies it checks against, for the tests that run under it.
"$ROOT/hack/runtime.sh" install >/dev/null
cd "$ROOT"
go run ./cmd/sharness-ai install
go test -tags e2e -count=1 -v "$@" ./e2e/...
