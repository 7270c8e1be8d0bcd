#!/usr/bin/env bash
# engine.sh: install, start, stop and report the Docker engine SHarness builds and tests on.
#
# Usage: hack/engine.sh install|start|stop [--force]|status|running
#
# Two engines (docs/engines.md): SHARNESS_ENGINE=debian (the default) is Debian's docker.io
# (Engine 20.10); SHARNESS_ENGINE=current is Engine 29's line built from the Go module proxy by
# hack/engine-current.sh (dockerd, containerd, runc, docker-init and buildx) into a cached prefix.
# The compose v2 plugin is built from the Go module proxy for both (docs/architecture.md, "The
# tree"). `start` records in $SHARNESS_ENGINE_STATE whether it started dockerd itself, and `stop`
# only ever stops a dockerd this script started, by its recorded pid, and only when no container
# runs on it.
#
# Only one engine runs at a time: both answer on /var/run/docker.sock and use the same iptables
# chains and the stack's fixed subnets, so `start` refuses while the other one's dockerd runs.
# The current engine keeps its own state, /var/lib/sharness-engine/<version>/docker and
# /run/sharness-engine/<version>/docker, bind-mounted at Docker's default data root and exec root
# (/var/lib/docker, /run/docker) while it runs and unmounted when it stops: the shim judges mount
# sources and root paths against those defaults (host/shim/mounts.go), so it sees both engines
# the same way, and the Debian engine's state is never touched.
#
# Environment:
#   SHARNESS_ENGINE         debian (default) or current
#   SHARNESS_ENGINE_STATE   state dir (pid file, log, ownership marker); default /tmp/sharness-engine
#                           (the current engine's are in its current/ subfolder)
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

ENGINE=${SHARNESS_ENGINE:-debian}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CURRENT=$ROOT/hack/engine-current.sh
STATE_DIR=${SHARNESS_ENGINE_STATE:-/tmp/sharness-engine}
case $ENGINE in
debian) ;;
current) STATE_DIR=$STATE_DIR/current ;;
*)
	printf 'engine: SHARNESS_ENGINE=%s: want debian or current\n' "$ENGINE" >&2
	exit 2
	;;
esac
# The current engine's binaries, and its own data root and exec root (mounted at Docker's defaults
# while it runs).
CURRENT_BIN=$("$CURRENT" prefix)
CURRENT_STATE=/var/lib/sharness-engine/$(basename "$(dirname "$CURRENT_BIN")")/docker
CURRENT_EXEC=/run/sharness-engine/$(basename "$(dirname "$CURRENT_BIN")")/docker
DATA_ROOT=/var/lib/docker
EXEC_ROOT=/run/docker
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

# install_current: what the current engine needs beside its own binaries (busybox-static for the
# images, a docker CLI: /usr/local/bin/docker if there is one, else Debian's).
install_current() {
	if ! command -v docker >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
		log "installing busybox-static (and docker.io's CLI if none) from Debian"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
		local pkgs=(busybox-static)
		command -v docker >/dev/null 2>&1 || pkgs+=(docker.io)
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}"
	fi
	"$CURRENT" build
}

cmd_install() {
	if [ "$ENGINE" = current ]; then install_current; else install_engine; fi
	install_compose
}

# dockerd_engine PID: "current" if the dockerd PID runs the current engine's binary, else "debian"
# (Debian's or any other dockerd).
dockerd_engine() {
	local exe
	exe=$(readlink "/proc/$1/exe" 2>/dev/null || true)
	if [ "${exe% (deleted)}" = "$CURRENT_BIN/dockerd" ]; then echo current; else echo debian; fi
}

# other_engine prints "pid (binary)" of a running dockerd that is not the selected engine's.
other_engine() {
	local pid
	for pid in $(pgrep -x dockerd || true); do
		if [ "$(dockerd_engine "$pid")" != "$ENGINE" ]; then
			echo "$pid ($(readlink "/proc/$pid/exe" 2>/dev/null || echo '?'))"
			return
		fi
	done
}

# mounted_from DIR: the folder bind-mounted at DIR (findmnt's [/path] part), or nothing.
mounted_from() {
	findmnt -n -o SOURCE --mountpoint "$1" 2>/dev/null | sed -n 's/^[^[]*\[\(.*\)\]$/\1/p' | tail -n1
}

# bind_current: the current engine's own data root and exec root at Docker's default paths.
bind_current() {
	local pair src dst
	for pair in "$CURRENT_STATE:$DATA_ROOT" "$CURRENT_EXEC:$EXEC_ROOT"; do
		src=${pair%%:*} dst=${pair#*:}
		as_root mkdir -p "$src" "$dst"
		as_root chmod 0710 "$src"
		[ "$(mounted_from "$dst")" = "$src" ] && continue
		as_root mount --bind "$src" "$dst"
		log "bound $src at $dst"
	done
}

# unbind_current: undoes bind_current (and every mount the engine left below those folders); only
# with no dockerd running, so neither engine's live state is ever unmounted.
unbind_current() {
	local dst
	case "$(mounted_from "$DATA_ROOT") $(mounted_from "$EXEC_ROOT")" in
	*/sharness-engine/*) ;;
	*) return 0 ;;
	esac
	if pgrep -x dockerd >/dev/null; then
		log "a dockerd runs: leaving $DATA_ROOT and $EXEC_ROOT mounted"
		return 0
	fi
	for dst in "$EXEC_ROOT" "$DATA_ROOT"; do
		case $(mounted_from "$dst") in
		/var/lib/sharness-engine/* | /run/sharness-engine/*)
			as_root umount -R "$dst" 2>/dev/null || as_root umount -R -l "$dst"
			log "unmounted the current engine's state from $dst"
			;;
		esac
	done
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
	local other
	other=$(other_engine)
	if [ -n "$other" ]; then
		die "SHARNESS_ENGINE=$ENGINE, but the other engine's dockerd runs: pid $other; only one engine runs at a time (stop it first)"
	fi
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
	local dockerd=dockerd path=$PATH
	if [ "$ENGINE" = current ]; then
		[ -x "$CURRENT_BIN/dockerd" ] || die "$CURRENT_BIN/dockerd missing: run 'SHARNESS_ENGINE=current hack/engine.sh install'"
		# Its containerd, containerd-shim-runc-v2, runc, docker-proxy and docker-init come first on
		# PATH (the shim execs the first runc on PATH too).
		dockerd=$CURRENT_BIN/dockerd path=$CURRENT_BIN:$PATH
		bind_current
	else
		command -v dockerd >/dev/null 2>&1 || die "dockerd missing: run 'hack/engine.sh install'"
		# A current engine that died without `stop` may have left its state mounted.
		unbind_current
	fi
	mkdir -p "$STATE_DIR"
	rm -f "$OWNED"
	log "starting dockerd (log $LOG_FILE)"
	# setsid: the daemon must outlive this script and its caller's process group.
	[ -x "$RUNTIME_BIN" ] || die "$RUNTIME_BIN missing: run 'hack/runtime.sh install' first (dockerd registers it as runtime sharness)"
	local flags=(--pidfile "$PID_FILE" --add-runtime "sharness=$RUNTIME_BIN")
	if [ "$ENGINE" = current ]; then
		flags+=(--data-root "$DATA_ROOT" --exec-root "$EXEC_ROOT")
	fi
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
		exec "${sudo[@]}" env PATH="$path" setsid "$dockerd" "${flags[@]}" >>"$LOG_FILE" 2>&1 </dev/null
	) &
	local launcher=$!
	if ! wait_up "$launcher"; then
		# Ours, by $!: do not leave a half-started daemon behind.
		as_root kill -TERM "$launcher" 2>/dev/null || true
		tail -n 20 "$LOG_FILE" >&2 || true
		if [ "$ENGINE" = current ]; then
			sleep 2
			unbind_current
		fi
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
		[ "$ENGINE" = current ] && unbind_current
		return 0
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
	[ "$ENGINE" = current ] && unbind_current
	return 0
}

# cmd_running prints which engine the running dockerd is (debian or current), or nothing.
cmd_running() {
	local pid
	for pid in $(pgrep -x dockerd || true); do
		dockerd_engine "$pid"
		return
	done
}

cmd_status() {
	local rc=0 pid
	echo "selected: SHARNESS_ENGINE=$ENGINE$([ "$ENGINE" = current ] && echo " ($CURRENT_BIN)")"
	for pid in $(pgrep -x dockerd || true); do
		echo "dockerd: pid $pid, the $(dockerd_engine "$pid") engine ($(readlink "/proc/$pid/exe" 2>/dev/null))"
	done
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
running) cmd_running ;;
*)
	echo "usage: $0 install|start|stop [--force]|status|running" >&2
	exit 2
	;;
esac
