#!/usr/bin/env bash
# claude-code.sh: run Claude Code as the stack's agent on your workspace (docs/claude-code.md).
#
# Usage: hack/claude-code.sh [--offline] [claude arguments...]
#
#   hack/claude-code.sh                           interactive, on ./workspace, against the real API
#   hack/claude-code.sh -p "explain main.go"      one prompt; prints the answer
#   hack/claude-code.sh --model NAME ...          a model business.llm.models allows
#   SHARNESS_AI_WORKSPACE=~/src/app hack/claude-code.sh
#   hack/claude-code.sh --offline -p "hello"      the offline world instead of the internet, with a
#                                                 throwaway key and the scripted model (a demo of
#                                                 the path, not a useful model)
#
# It builds sharness/claude-code:dev when it is missing or older than images/claude-code/ and the
# pin in hack/build-claude-code.sh, then hands over to hack/up.sh with compose/claude-code.yml as
# the agent's overlay: up.sh checks the policy and its hash, starts the engine if needed, builds the
# other images, starts launcher, net, llm, kms, bash and fs, seals the API key to this session's
# kms (yours, read from the terminal and never from the command line; a throwaway one with
# --offline), runs Claude Code in the agent container with the arguments above, and tears the
# stack down when Claude Code exits. Exit status: Claude Code's, or up.sh's when the stack failed.
#
# The workspace (SHARNESS_AI_WORKSPACE, default ./workspace) must be writable by uid 65532: the
# agent, bash and fs run as that uid. When it does not exist, it is made, owned by that uid.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=sharness/claude-code:dev
cd "$ROOT"

log() { printf 'claude-code: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

online=1
if [ "${1:-}" = --offline ]; then
	online=
	shift
fi

# up.sh runs an overlay's agent interactively once it reads SHARNESS_AI_OVERLAY (docs/claude-code.md,
# "Starting it"); an up.sh without it would run the demo agent instead, so stop here.
grep -q SHARNESS_AI_OVERLAY hack/up.sh \
	|| die "hack/up.sh does not run an overlay's agent (SHARNESS_AI_OVERLAY) in this checkout: see docs/claude-code.md"

want=$(hack/build-claude-code.sh --inputs)
have=$(docker image inspect -f '{{index .Config.Labels "ai.sharness.claude-code.inputs"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" != "$want" ]; then
	log "building $IMAGE (${have:+its inputs changed}${have:-missing})"
	hack/build-claude-code.sh
fi

export SHARNESS_AI_WORKSPACE=${SHARNESS_AI_WORKSPACE:-$ROOT/workspace}
if [ ! -e "$SHARNESS_AI_WORKSPACE" ]; then
	mkdir -p "$SHARNESS_AI_WORKSPACE"
	chown 65532:65532 "$SHARNESS_AI_WORKSPACE" || die "cannot give $SHARNESS_AI_WORKSPACE to uid 65532 (run as root, or make it writable by that uid)"
fi
SHARNESS_AI_WORKSPACE=$(cd "$SHARNESS_AI_WORKSPACE" && pwd)
log "workspace $SHARNESS_AI_WORKSPACE"

export SHARNESS_AI_OVERLAY=compose/claude-code.yml
if [ -n "$online" ]; then
	export SHARNESS_AI_ONLINE=1
else
	unset SHARNESS_AI_ONLINE
fi
exec "$ROOT/hack/up.sh" "$@"
