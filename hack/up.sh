#!/usr/bin/env bash
# up.sh: the main job. Runs the default stack (today: the demo agent alone) on a Docker engine,
# installing and starting one if none answers, and stops only what it started.
#
# Usage: hack/up.sh            SHARNESS_AI_POLICY_HASH=sha256:... hack/up.sh  (refuse any other policy)
#
# Before anything runs, the committed docker-compose.yml and compiled/ must be exactly what the
# default manifest compiles to, and, when SHARNESS_AI_POLICY_HASH is given, the manifest's hash
# must equal it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENGINE=$ROOT/hack/engine.sh
cd "$ROOT"

go run ./cmd/sharness-ai compile --check
M=$(go run ./cmd/sharness-ai hash)
if [ -z "${SHARNESS_AI_POLICY_HASH:-}" ]; then
	# The demo supplies the committed manifest's hash itself; a person pins their own instead.
	echo "up: supplying policy $M (export SHARNESS_AI_POLICY_HASH yourself to refuse any other policy)" >&2
	export SHARNESS_AI_POLICY_HASH=$M
fi
go run ./cmd/sharness-ai verify --policy-hash "$SHARNESS_AI_POLICY_HASH"

"$ENGINE" install
if ! docker info >/dev/null 2>&1; then
	"$ENGINE" start
	trap '"$ENGINE" stop || true' EXIT
fi
"$ROOT/hack/build-images.sh"

project=sharness
status=0
docker compose -f docker-compose.yml -p "$project" up --abort-on-container-exit --exit-code-from agent || status=$?
docker compose -f docker-compose.yml -p "$project" down --volumes >/dev/null 2>&1 || true
exit "$status"
