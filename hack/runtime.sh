#!/usr/bin/env bash
# runtime.sh: build and install sharness-runtime, the OCI runtime shim (cmd/sharness-runtime,
# issue 6), and report how it would be registered with the engine.
#
# Usage: hack/runtime.sh install|status
#
#   install  builds cmd/sharness-runtime, its policy check cmd/sharness-runtime/check and its
#            Landlock helper cmd/sharness-landlock statically (CGO_ENABLED=0) and installs them to
#            $SHARNESS_RUNTIME_BIN, $SHARNESS_RUNTIME_CHECK and $SHARNESS_RUNTIME_LANDLOCK, then
#            prints the dockerd flag and daemon.json snippet.
#   status   says whether it is installed, which runc it hands over to, whether strict mode is on
#            and whether the running engine has a runtime named "sharness".
#
# Neither verb restarts or reconfigures the running engine: hack/engine.sh registers the runtime
# (and makes it the default) when it starts dockerd. A runtime registered with dockerd is only a
# Boundary for containers that use it: anyone with the Docker API can still name runc.
#
# Environment:
#   SHARNESS_RUNTIME_BIN       install path; default /usr/local/bin/sharness-runtime
#   SHARNESS_RUNTIME_RUNC      the runc the shim execs; default runc on PATH (Debian: /usr/sbin/runc)
#   SHARNESS_RUNTIME_POLICIES  compiled policies root; default /etc/sharness-ai/policies
#   SHARNESS_RUNTIME_CHECK     the policy check the shim hands every command but start, state, kill,
#                              delete, events, ps, pause and resume to; default
#                              /usr/local/lib/sharness-ai/sharness-runtime-check
#   SHARNESS_RUNTIME_LANDLOCK  the Landlock helper the shim binds into containers; default
#                              /usr/local/lib/sharness-ai/sharness-landlock
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

BIN=${SHARNESS_RUNTIME_BIN:-/usr/local/bin/sharness-runtime}
CHECK=${SHARNESS_RUNTIME_CHECK:-/usr/local/lib/sharness-ai/sharness-runtime-check}
HELPER=${SHARNESS_RUNTIME_LANDLOCK:-/usr/local/lib/sharness-ai/sharness-landlock}
NAME=sharness
STRICT_FILE=/etc/sharness-ai/strict
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf 'runtime: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

as_root() {
	if [ "$(id -u)" -eq 0 ] || [ -w "$(dirname "$BIN")" ]; then "$@"; else sudo "$@"; fi
}

registration() {
	cat <<EOF
To register it (not done by this script), either start dockerd with
  --add-runtime $NAME=$BIN
or add to /etc/docker/daemon.json, then restart dockerd:
  { "runtimes": { "$NAME": { "path": "$BIN" } } }
and, to cover every container, also "default-runtime": "$NAME" (--default-runtime=$NAME).
Compose services then choose it with: runtime: $NAME
EOF
}

install_runtime() {
	command -v go >/dev/null 2>&1 || export PATH=/usr/local/go/bin:$PATH
	TMP_DIR=$(mktemp -d)
	trap 'rm -rf "$TMP_DIR"' EXIT
	local tmp=$TMP_DIR
	log "building cmd/sharness-runtime (static)"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/sharness-runtime" ./cmd/sharness-runtime)
	log "building cmd/sharness-runtime/check (static)"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/sharness-runtime-check" ./cmd/sharness-runtime/check)
	log "building cmd/sharness-landlock (static)"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/sharness-landlock" ./cmd/sharness-landlock)
	# Root-owned and not writable by anyone else: dockerd runs the first two for every runc command,
	# and every confined container executes the helper first. The check goes in before the shim
	# that hands commands to it.
	as_root install -D -m 0755 "$tmp/sharness-runtime-check" "$CHECK"
	as_root install -D -m 0755 "$tmp/sharness-runtime" "$BIN"
	as_root install -D -m 0755 "$tmp/sharness-landlock" "$HELPER"
	log "installed $BIN ($(sha256sum "$BIN" | cut -c1-16)…), $CHECK ($(sha256sum "$CHECK" | cut -c1-16)…) and $HELPER ($(sha256sum "$HELPER" | cut -c1-16)…)"
	registration
}

status_runtime() {
	if [ -x "$BIN" ]; then
		log "installed: $BIN ($(sha256sum "$BIN" | cut -c1-16)…)"
	else
		log "not installed at $BIN"
	fi
	if [ -x "$CHECK" ]; then log "policy check: $CHECK"; else log "policy check: not installed at $CHECK"; fi
	if [ -x "$HELPER" ]; then log "landlock helper: $HELPER"; else log "landlock helper: not installed at $HELPER"; fi
	local runc=${SHARNESS_RUNTIME_RUNC:-$(PATH=$PATH:/usr/sbin:/sbin command -v runc || true)}
	if [ -n "$runc" ]; then log "runc: $runc ($("$runc" --version 2>/dev/null | head -n1))"; else log "runc: not found"; fi
	log "policies: ${SHARNESS_RUNTIME_POLICIES:-/etc/sharness-ai/policies}"
	if [ -e "$STRICT_FILE" ]; then log "strict mode: on ($STRICT_FILE)"; else log "strict mode: off (no $STRICT_FILE)"; fi
	local runtimes
	if runtimes=$(docker info --format '{{json .Runtimes}}' 2>/dev/null); then
		case $runtimes in
		*"\"$NAME\""*) log "engine: runtime \"$NAME\" registered" ;;
		*) log "engine: running, runtime \"$NAME\" not registered" ;;
		esac
		log "engine: default runtime $(docker info --format '{{.DefaultRuntime}}' 2>/dev/null)"
	else
		log "engine: not reachable"
	fi
	registration
}

case ${1:-} in
install) install_runtime ;;
status) status_runtime ;;
*) die "usage: $0 install|status" ;;
esac
