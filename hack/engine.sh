#!/usr/bin/env bash
# engine.sh: install, start, stop and report the Docker engine SHarness builds and tests on.
#
# Usage: hack/engine.sh install|start|stop [--force]|status
#
# The engine is Debian's docker.io (Engine 20.10); the compose v2 plugin is built from the Go
# module proxy (docs/architecture.md, "The tree"). `start` records in $SHARNESS_ENGINE_STATE whether it started
# dockerd itself, and `stop` only ever stops a dockerd this script started, by its recorded pid,
# and only when no container runs on it.
#
# Environment:
#   SHARNESS_ENGINE_STATE   state dir (pid file, log, ownership marker); default /tmp/sharness-engine
#   SHARNESS_COMPOSE_VERSION compose module version to build; default v2.40.3
#   SHARNESS_RUNTIME_BIN    the sharness-runtime shim dockerd registers as runtime "sharness";
#                           default /usr/local/bin/sharness-runtime (hack/runtime.sh install puts it
#                           there; `start` refuses to start without it). It is also the engine's
#                           default runtime, so a container that names no runtime goes through it
#                           too (containers without SHarness's marker pass through to runc).
#   SHARNESS_RUNTIME_DEFAULT set to 0 to register the shim without making it the default: then only
#                           containers that ask for it (`runtime: sharness`) use it.
#
# Either way, anyone with the Docker API can still ask for `--runtime runc` by name (dockerd
# always offers runc): the shim is a Boundary against an edited compose file, not against a
# holder of the Docker socket, who is root on the host anyway.
set -euo pipefail

STATE_DIR=${SHARNESS_ENGINE_STATE:-/tmp/sharness-engine}
PID_FILE=$STATE_DIR/dockerd.pid   # written by dockerd itself (--pidfile)
OWNED=$STATE_DIR/started-by-us    # present only if we started dockerd; holds its pid
LOG_FILE=$STATE_DIR/dockerd.log
COMPOSE_VERSION=${SHARNESS_COMPOSE_VERSION:-v2.40.3}
RUNTIME_BIN=${SHARNESS_RUNTIME_BIN:-/usr/local/bin/sharness-runtime}
COMPOSE_MODULE=github.com/docker/compose/v2
PLUGIN=$HOME/.docker/cli-plugins/docker-compose
START_TIMEOUT=60

log() { printf 'engine: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

engine_up() { docker info >/dev/null 2>&1; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_engine() {
	if command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 \
		&& [ -x /bin/busybox ]; then
		log "engine present: $(dockerd --version)"
		return
	fi
	log "installing docker.io and busybox-static from Debian"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io busybox-static
}

install_compose() {
	if docker compose version >/dev/null 2>&1; then
		log "compose present: $(docker compose version)"
		return
	fi
	command -v go >/dev/null 2>&1 || die "go is needed to build the compose plugin"
	log "building compose $COMPOSE_VERSION from the Go module proxy (about 5 minutes)"
	local started=$SECONDS dir src
	src=$(mktemp -d "${TMPDIR:-/tmp}/sharness-compose.XXXXXX")
	# Download from an empty directory so no enclosing go.mod or go.work is consulted.
	dir=$(cd "$src" && GOWORK=off GOFLAGS=-mod=mod \
		go mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		die "go mod download $COMPOSE_MODULE@$COMPOSE_VERSION: no module directory"
	fi
	# The module cache is read-only and `-mod=mod` may rewrite go.sum: build in a writable copy.
	cp -R "$dir/." "$src"
	chmod -R u+w "$src"
	mkdir -p "$(dirname "$PLUGIN")"
	(
		cd "$src"
		GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -trimpath \
			-ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
			-o "$PLUGIN.tmp" ./cmd
	)
	mv "$PLUGIN.tmp" "$PLUGIN"
	rm -rf "$src"
	docker compose version >/dev/null || die "built $PLUGIN but 'docker compose version' fails"
	log "compose built in $((SECONDS - started)) s: $(docker compose version)"
}

cmd_install() {
	install_engine
	install_compose
}

# owned_pid prints the pid of the dockerd we started if it is still that process, else nothing.
owned_pid() {
	[ -f "$OWNED" ] || return 0
	local pid
	pid=$(cat "$OWNED")
	if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
		echo "$pid"
	fi
}

# wait_up waits up to START_TIMEOUT seconds for `docker info`; with a pid, gives up if it dies.
wait_up() {
	local pid=${1:-} deadline=$((SECONDS + START_TIMEOUT))
	until engine_up; do
		if [ "$SECONDS" -ge "$deadline" ] || { [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; }; then
			return 1
		fi
		sleep 1
	done
}

cmd_start() {
	if ! engine_up && [ -z "$(owned_pid)" ] && pgrep -x dockerd >/dev/null; then
		log "a dockerd we did not start is running but not answering yet: waiting for it"
		wait_up || die "the running dockerd did not answer 'docker info' within ${START_TIMEOUT}s"
	fi
	if engine_up; then
		if [ -n "$(owned_pid)" ]; then
			log "engine already running, started by us (pid $(owned_pid))"
		else
			rm -f "$OWNED"
			log "engine already running, not started by us: using it"
		fi
		return
	fi
	command -v dockerd >/dev/null 2>&1 || die "dockerd missing: run 'hack/engine.sh install'"
	mkdir -p "$STATE_DIR"
	rm -f "$OWNED"
	log "starting dockerd (log $LOG_FILE)"
	# setsid: the daemon must outlive this script and its caller's process group.
	[ -x "$RUNTIME_BIN" ] || die "$RUNTIME_BIN missing: run 'hack/runtime.sh install' first (dockerd registers it as runtime sharness)"
	local flags=(--pidfile "$PID_FILE" --add-runtime "sharness=$RUNTIME_BIN")
	if [ "${SHARNESS_RUNTIME_DEFAULT:-1}" != 0 ]; then
		flags+=(--default-runtime sharness)
	fi
	log "runtimes: sharness=$RUNTIME_BIN$([ "${SHARNESS_RUNTIME_DEFAULT:-1}" != 0 ] && echo ' (default)')"
	# dockerd outlives this script: it must not inherit a descriptor beyond the three standard
	# ones (a caller's `flock FILE hack/engine.sh start` would otherwise stay locked by dockerd).
	(
		for fd in /proc/self/fd/*; do
			fd=${fd##*/}
			[ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
		done
		sudo=()
		[ "$(id -u)" -eq 0 ] || sudo=(sudo)
		exec "${sudo[@]}" setsid dockerd "${flags[@]}" >>"$LOG_FILE" 2>&1 </dev/null
	) &
	local launcher=$!
	if ! wait_up "$launcher"; then
		# Ours, by $!: do not leave a half-started daemon behind.
		as_root kill -TERM "$launcher" 2>/dev/null || true
		tail -n 20 "$LOG_FILE" >&2 || true
		die "dockerd did not answer 'docker info' within ${START_TIMEOUT}s"
	fi
	local pid
	pid=$(cat "$PID_FILE")
	echo "$pid" >"$OWNED"
	log "dockerd up, pid $pid (pid file $PID_FILE)"
}

# cmd_stop [--force]: the engine may be shared (other sessions run containers on the dockerd we
# started); stopping it would kill their containers, so running containers keep it up unless forced.
cmd_stop() {
	local pid running
	pid=$(owned_pid)
	if [ -z "$pid" ]; then
		rm -f "$OWNED"
		log "no dockerd started by this script is running: nothing to stop"
		return
	fi
	running=$(docker ps -q 2>/dev/null | wc -l)
	if [ "$running" -gt 0 ] && [ "${1:-}" != --force ]; then
		docker ps --format '  {{.Names}} ({{.Image}}, {{.Status}})' >&2 || true
		die "$running container(s) still running: dockerd pid $pid left up ('stop --force' stops it)"
	fi
	log "stopping dockerd pid $pid"
	as_root kill -TERM "$pid"
	local deadline=$((SECONDS + 30))
	while [ -e "/proc/$pid" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			die "dockerd pid $pid still running 30s after SIGTERM"
		fi
		sleep 0.5
	done
	rm -f "$OWNED"
	log "dockerd stopped"
}

cmd_status() {
	local rc=0
	if engine_up; then
		echo "engine: up ($(docker info -f '{{.ServerVersion}}' 2>/dev/null))"
	else
		echo "engine: down"
		rc=1
	fi
	if [ -n "$(owned_pid)" ]; then
		echo "started by us: yes, pid $(owned_pid), pid file $PID_FILE, log $LOG_FILE"
	else
		echo "started by us: no"
	fi
	if docker compose version >/dev/null 2>&1; then
		echo "compose: $(docker compose version --short)"
	else
		echo "compose: missing"
		rc=1
	fi
	return "$rc"
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop "${2:-}" ;;
status) cmd_status ;;
*)
	echo "usage: $0 install|start|stop [--force]|status" >&2
	exit 2
	;;
esac
