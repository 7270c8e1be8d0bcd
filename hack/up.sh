#!/usr/bin/env bash
# up.sh: the main job. Runs the default stack (launcher, net, llm, kms, bash, fs and the demo
# agent) around
# the offline world of compose/world.yml on a Docker engine, installing and starting one if none
# answers, and stops only what it started. Once kms has made its session identity, the script
# seals a throwaway API key to it, as a person seals a real one (README), and only then starts
# the agent. The agent prints its confinement report, its conversation with the offline model
# through llm (which swaps the placeholder key for the sealed one), a shell command through bash's
# MCP tool and a write through fs, and the side-door probe's table: every door refused, the allowed
# paths (curl, git) working. The workspace is a throwaway folder unless SHARNESS_AI_WORKSPACE
# names yours (it must be writable by uid 65532: the agent, bash and fs run as that uid).
#
# Usage: hack/up.sh [agent arguments...]
#        SHARNESS_AI_POLICY_HASH=sha256:... hack/up.sh  (refuse any other policy)
#
#   SHARNESS_AI_OVERLAY=FILE  a compose overlay that replaces the agent (hack/claude-code.sh passes
#                             compose/claude-code.yml): the agent then runs with `docker compose run`,
#                             given up.sh's arguments, on a terminal when up.sh has one
#   SHARNESS_AI_ONLINE=1      no offline world: net reaches the real hosts, and the key sealed to kms
#                             is yours, read from the terminal (never from the command line)
#
# Offline, the stack is the offline world's: policies/world/manifest.yaml (the default policy and
# the test_world section that grants the world's test switches, under its hash), compiled to
# compose/world/, with compose/world.yml over it. Online it is the default policy's
# docker-compose.yml, which grants none. Before anything runs, the committed docker-compose.yml and
# compiled/, and compose/world/, must be exactly what the two manifests compile to, and, when
# SHARNESS_AI_POLICY_HASH is given, the hash of the manifest that runs must equal it. Every
# service runs under the runtime shim (sharness-runtime, installed here and registered by
# hack/engine.sh), which refuses any container wider than its compiled policy.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENGINE=$ROOT/hack/engine.sh
cd "$ROOT"

go run ./cmd/sharness-ai compile --check
go run ./cmd/sharness-ai -f policies/world/manifest.yaml compile -o compose/world --check
if [ -n "${SHARNESS_AI_ONLINE:-}" ]; then
	manifest=policies/default/manifest.yaml stackdir=.
else
	manifest=policies/world/manifest.yaml stackdir=compose/world
fi
# Every sharness-ai below reads this manifest.
export SHARNESS_AI_MANIFEST=$manifest
M=$(go run ./cmd/sharness-ai hash)
if [ -z "${SHARNESS_AI_POLICY_HASH:-}" ]; then
	# The demo supplies the committed manifest's hash itself; a person pins their own instead.
	echo "up: supplying policy $M (export SHARNESS_AI_POLICY_HASH yourself to refuse any other policy)" >&2
	export SHARNESS_AI_POLICY_HASH=$M
fi
go run ./cmd/sharness-ai verify --policy-hash "$SHARNESS_AI_POLICY_HASH"

"$ENGINE" install
# The runtime shim (every service asks for `runtime: sharness`) before the engine that registers it.
"$ROOT/hack/runtime.sh" install >/dev/null
if ! docker info >/dev/null 2>&1; then
	"$ENGINE" start
	started=1
	trap '"$ENGINE" stop || true' EXIT
fi
case $(docker info --format '{{json .Runtimes}}') in
*'"sharness"'*) ;;
*) echo "up: the running engine has no runtime \"sharness\": restart it with hack/engine.sh (or register $(command -v sharness-runtime || echo /usr/local/bin/sharness-runtime) in daemon.json)" >&2; exit 1 ;;
esac
# The compiled policies the shim checks each container against (root-owned, /etc/sharness-ai); for
# the world also its fixtures.json, which lists the world's own containers.
"$ROOT/hack/build-images.sh"
# After the images: install also records each component's code (its entrypoint's SHA-256 in the
# image built here), by which the shim knows a component's container.
go run ./cmd/sharness-ai install --replace

# The probe also tries the host's own addresses and the edge gateways (port 9: if anything
# answered, even with a refusal, the wall would have a hole there).
addrs=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); printf "%s:9,", a[1]}')
export SHARNESS_PROBE_HOST_ADDRS="${addrs}10.213.0.1:9,10.214.0.1:9"

work=$(mktemp -d)
chmod 0755 "$work"
if [ -n "${SHARNESS_AI_ONLINE:-}" ]; then
	read -rsp 'up: your Anthropic API key (not shown): ' key </dev/tty
	echo >&2
	[ -n "$key" ] || { echo "up: no key given" >&2; exit 2; }
else
	# A throwaway key stands in for a real one; the offline model accepts this key alone, so the
	# demo shows the sealed key, and not the agent's placeholder, is what reached the model.
	key="sk-ant-api03-offline-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	export SHARNESS_MODEL_EXPECT_KEY_SHA256=$(printf %s "$key" | sha256sum | cut -d' ' -f1)
	# The offline world's throwaway TLS leaf and CA, handed to world, model, llm and the probe.
	eval "$(go run ./testkit/worldca)"
fi
export SHARNESS_AI_SECRETS_DIR=$work/secrets
mkdir -m 0755 "$SHARNESS_AI_SECRETS_DIR"

if [ -z "${SHARNESS_AI_WORKSPACE:-}" ]; then
	export SHARNESS_AI_WORKSPACE=$work/workspace
	mkdir "$SHARNESS_AI_WORKSPACE"
	chown 65532:65532 "$SHARNESS_AI_WORKSPACE"
fi
# The protected paths must exist before the agent and bash mount them read-only.
go run ./cmd/sharness-ai workspace init --dir "$SHARNESS_AI_WORKSPACE"

files=(-f "$stackdir/docker-compose.yml")
services=(launcher net llm kms bash fs)
if [ -z "${SHARNESS_AI_ONLINE:-}" ]; then
	files+=(-f compose/world.yml)
	services+=(world model)
fi
[ -z "${SHARNESS_AI_OVERLAY:-}" ] || files+=(-f "$SHARNESS_AI_OVERLAY")
compose=(docker compose "${files[@]}" -p sharness)
cleanup() {
	"${compose[@]}" down --volumes >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap 'cleanup; [ -n "${started:-}" ] && "$ENGINE" stop || true' EXIT

# The session record the shim holds every component to: this policy, this workspace, these
# secrets (root's, /etc/sharness-ai/sessions/sharness.json).
go run ./cmd/sharness-ai session record -p sharness --dir "$stackdir" >/dev/null
status=0
"${compose[@]}" up --pull never --detach --wait "${services[@]}" || status=$?
if [ "$status" -eq 0 ]; then
	go run ./cmd/sharness-ai kms bundle -p sharness "${files[@]}" --wait 30s --out "$work/bundle.json"
	printf %s "$key" | go run ./cmd/sharness-ai secret seal --to "$work/bundle.json" --out "$SHARNESS_AI_SECRETS_DIR" anthropic-api-key
	unset key
	if [ -n "${SHARNESS_AI_OVERLAY:-}" ]; then
		tty=()
		[ -t 0 ] && [ -t 1 ] || tty=(-T)
		"${compose[@]}" run --rm --no-deps "${tty[@]}" agent "$@" || status=$?
	else
		"${compose[@]}" up --pull never --abort-on-container-exit --exit-code-from agent agent || status=$?
	fi
fi
[ "$status" -eq 0 ] || "${compose[@]}" logs --no-color llm kms bash fs >&2 || true
exit "$status"
