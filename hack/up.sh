#!/usr/bin/env bash
# up.sh: the main job. Runs the default stack (launcher, net and the demo agent) around the
# offline world of compose/world.yml on a Docker engine, installing and starting one if none
# answers, and stops only what it started. The agent prints its confinement report and the
# side-door probe's table: every door refused, the allowed paths (curl, git) working.
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

# The probe also tries the host's own addresses and the edge gateways (port 9: if anything
# answered, even with a refusal, the wall would have a hole there).
addrs=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); printf "%s:9,", a[1]}')
export SHARNESS_PROBE_HOST_ADDRS="${addrs}10.213.0.1:9,10.214.0.1:9"

compose=(docker compose -f docker-compose.yml -f compose/world.yml -p sharness)
status=0
"${compose[@]}" up --pull never --abort-on-container-exit --exit-code-from agent || status=$?
"${compose[@]}" down --volumes >/dev/null 2>&1 || true
exit "$status"
