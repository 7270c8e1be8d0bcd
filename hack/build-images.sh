#!/usr/bin/env bash
# build-images.sh: build every SHarness image offline, from prebuilt static binaries.
#
# Usage: hack/build-images.sh
#
# Binaries and root file systems go to bin/ (git-ignored, and the only build context the
# .dockerignore lets through); the root Dockerfile then copies them into FROM scratch images
# named sharness/<component>:dev. No registry is contacted. The agent image copies curl and git
# from this machine (Debian's packages, installed if missing and we are root); the world image
# carries a git repository made here.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/bin
BUSYBOX=${SHARNESS_BUSYBOX:-/bin/busybox} # from Debian's busybox-static (hack/engine.sh install)
TAG=dev
VERSION=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo dev)
COMPONENTS=(agent launcher net llm kms bash fs world model)

log() { printf 'build-images: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# gobuild PACKAGE OUTPUT: a static binary with the pure-Go resolver.
gobuild() {
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -tags netgo -ldflags='-s -w' -o "$2" "$1")
}

# busybox_userland DIR: busybox and a link per applet, where Debian's busybox puts each one.
busybox_userland() {
	local dir=$1 applet
	[ -x "$BUSYBOX" ] || die "$BUSYBOX missing: run 'hack/engine.sh install' (busybox-static)"
	mkdir -p "$dir/bin"
	cp "$BUSYBOX" "$dir/bin/busybox"
	for applet in $("$BUSYBOX" --list-full); do
		case $applet in bin/busybox | linuxrc) continue ;; esac
		mkdir -p "$dir/$(dirname "$applet")"
		ln -sf /bin/busybox "$dir/$applet"
	done
}

# need_tools PROGRAM...: install the Debian packages of the same names if a program is missing.
need_tools() {
	local missing=() p
	for p in "$@"; do command -v "$p" >/dev/null || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "${missing[*]} missing: apt-get install -y ${missing[*]}"
	log "installing ${missing[*]} from Debian"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
		|| die "could not install ${missing[*]}"
}

# copy_elf ROOTFS FILE...: each dynamically linked FILE at the same path in ROOTFS, with every
# shared library ldd lists for it and the dynamic loader, dereferenced, at their paths.
copy_elf() {
	local rootfs=$1 f lib
	shift
	for f in "$@"; do
		rm -f "$rootfs$f" # a busybox applet link may stand there
		install -D -m 0755 "$f" "$rootfs$f"
		for lib in $(ldd "$f" | grep -o '/[^ ]*'); do
			[ -e "$rootfs$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
		done
	done
}

# bare_repo DIR: a bare git repository with one commit, ready for git's "dumb HTTP" protocol
# (update-server-info writes the refs and pack lists a static file server needs).
bare_repo() {
	local work
	work=$(mktemp -d)
	(
		export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
			GIT_AUTHOR_NAME=sharness GIT_AUTHOR_EMAIL=world@sharness.test \
			GIT_COMMITTER_NAME=sharness GIT_COMMITTER_EMAIL=world@sharness.test \
			GIT_AUTHOR_DATE='2025-01-01T00:00:00Z' GIT_COMMITTER_DATE='2025-01-01T00:00:00Z'
		git init -q -b main --template= "$work"
		printf 'hello from the SHarness test world\n' >"$work/README"
		git -C "$work" add README
		git -C "$work" commit -q -m 'world: the repository the side-door suite clones'
		git init -q --bare -b main --template= "$1"
		git -C "$work" push -q "$1" main
		git --git-dir="$1" update-server-info
	)
	rm -rf "$work"
}

prepare_agent() {
	local rootfs=$BIN/agent-rootfs
	gobuild ./images/agent "$BIN/sharness-agent"
	gobuild ./testkit/probe "$BIN/sharness-probe"
	gobuild ./testkit/modelprobe "$BIN/sharness-modelprobe"
	gobuild ./testkit/shellprobe "$BIN/sharness-shellprobe"
	gobuild ./testkit/fsprobe "$BIN/sharness-fsprobe"
	rm -rf "$rootfs"
	mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/workspace"
	chmod 1777 "$rootfs/tmp"
	cp "$BIN/sharness-agent" "$BIN/sharness-probe" "$BIN/sharness-modelprobe" \
		"$BIN/sharness-shellprobe" "$BIN/sharness-fsprobe" "$rootfs/"
	busybox_userland "$rootfs"
	need_tools curl git
	copy_elf "$rootfs" /usr/bin/curl /usr/bin/git /usr/lib/git-core/git-remote-http
	# git runs its helpers from its exec path: git-remote-https for https:// URLs, and itself.
	ln -s git-remote-http "$rootfs/usr/lib/git-core/git-remote-https"
	ln -s /usr/bin/git "$rootfs/usr/lib/git-core/git"
	# A second shell the agent's policy does not list (process.exec): the probe shows Landlock
	# refusing to run it, as it would any interpreter an image carries but the policy leaves out.
	mkdir -p "$rootfs/opt/unlisted"
	cp "$BUSYBOX" "$rootfs/opt/unlisted/sh"
	printf 'root:x:0:0:root:/root:/bin/sh\nsharness:x:65532:65532:sharness:/tmp:/bin/false\n' \
		>"$rootfs/etc/passwd"
	printf 'root:x:0:\nsharness:x:65532:\n' >"$rootfs/etc/group"
}

prepare_launcher() {
	gobuild ./images/launcher "$BIN/sharness-launcher"
}

prepare_net() {
	gobuild ./images/net "$BIN/sharness-net"
}

# llm talks TLS to the real model API when there is one, so it carries Debian's CA bundle (at
# the path Go's crypto/x509 reads on Linux).
prepare_llm() {
	local rootfs=$BIN/llm-rootfs
	rm -rf "$rootfs"
	mkdir -p "$rootfs/etc/ssl/certs"
	gobuild ./images/llm "$rootfs/sharness-llm"
	if [ ! -r /etc/ssl/certs/ca-certificates.crt ]; then
		[ "$(id -u)" -eq 0 ] || die "/etc/ssl/certs/ca-certificates.crt missing: apt-get install -y ca-certificates"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates >&2
	fi
	cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
}

# The Debian packages whose programs make the userland of bash's sandboxes.
BASH_PACKAGES=(bash coreutils grep sed findutils tar gzip diffutils git curl make strace util-linux mount
	procps ca-certificates)

# need_packages PACKAGE...: install the Debian packages that are missing.
need_packages() {
	local missing=() p
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "${missing[*]} missing: apt-get install -y ${missing[*]}"
	log "installing ${missing[*]} from Debian"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
		|| die "could not install ${missing[*]}"
}

# bash: the MCP server and the userland its sandboxes run commands with, copied from this
# machine's Debian packages with every library they link. The layout is Debian's merged /usr, so
# the sandboxes' Landlock rules (read and execute under /usr) cover every program.
prepare_bash() {
	local rootfs=$BIN/bash-rootfs p progs=()
	gobuild ./images/bash "$BIN/sharness-bash"
	need_packages "${BASH_PACKAGES[@]}"
	rm -rf "$rootfs"
	mkdir -p "$rootfs"/usr/{bin,sbin,lib,lib64} "$rootfs"/{etc/ssl/certs,tmp,run,workspace}
	chmod 1777 "$rootfs/tmp"
	for p in bin sbin lib lib64; do ln -s "usr/$p" "$rootfs/$p"; done
	cp "$BIN/sharness-bash" "$rootfs/sharness-bash"
	for p in bash coreutils grep sed findutils tar gzip diffutils make strace procps; do
		while read -r f; do
			[ -f "$f" ] && [ -x "$f" ] && [ ! -L "$f" ] && progs+=("$f")
		done < <(dpkg -L "$p" | grep -E '^/(usr/)?s?bin/')
	done
	progs+=(/usr/bin/git /usr/bin/curl /usr/bin/unshare /usr/bin/nsenter /bin/mount /bin/umount
		/usr/lib/git-core/git-remote-http)
	copy_elf "$rootfs" "${progs[@]}"
	ln -sf bash "$rootfs/usr/bin/sh"
	ln -s git-remote-http "$rootfs/usr/lib/git-core/git-remote-https"
	ln -s /usr/bin/git "$rootfs/usr/lib/git-core/git"
	cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
	printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/bash\nsharness:x:65532:65532:sharness:/tmp:/bin/false\n' \
		>"$rootfs/etc/passwd"
	printf 'root:x:0:\nsandbox:x:1000:\nsharness:x:65532:\n' >"$rootfs/etc/group"
}

prepare_fs() {
	gobuild ./images/fs "$BIN/sharness-fs"
}

prepare_kms() {
	gobuild ./images/kms "$BIN/sharness-kms"
}

prepare_world() {
	local rootfs=$BIN/world-rootfs
	gobuild ./testkit/world "$BIN/sharness-world"
	rm -rf "$rootfs"
	mkdir -p "$rootfs/srv"
	cp "$BIN/sharness-world" "$rootfs/"
	need_tools git
	bare_repo "$rootfs/srv/repo.git"
}

# model: the offline Messages API (test infrastructure, like world).
prepare_model() {
	gobuild ./testkit/model "$BIN/sharness-model"
}

mkdir -p "$BIN" "$BIN/empty" # bin/empty: the audit and gate folders the Dockerfile makes
for c in "${COMPONENTS[@]}"; do
	log "preparing $c"
	"prepare_$c"
done
# The builder: BuildKit (dockerd's own, through the buildx CLI plugin, which
# hack/engine-current.sh builds) where the CLI has the plugin, else the deprecated legacy builder;
# SHARNESS_BUILDER=buildkit|legacy chooses. Neither needs a registry for FROM scratch (the
# Dockerfile names no syntax image). Every bin/ folder exists before the first build: the legacy
# builder runs every stage above its target in the Dockerfile, whatever the target needs.
BUILDER=${SHARNESS_BUILDER:-auto}
if [ "$BUILDER" = auto ]; then
	if docker buildx version >/dev/null 2>&1; then BUILDER=buildkit; else BUILDER=legacy; fi
fi
case $BUILDER in
buildkit) build_flags=(--provenance=false) buildkit=1 ;;
legacy) build_flags=() buildkit=0 ;;
*) die "SHARNESS_BUILDER=$BUILDER: want auto, buildkit or legacy" ;;
esac
log "builder: $BUILDER"
for c in "${COMPONENTS[@]}"; do
	log "building sharness/$c:$TAG"
	DOCKER_BUILDKIT=$buildkit docker build --quiet "${build_flags[@]}" --target "$c" \
		-t "sharness/$c:$TAG" --build-arg VERSION="$VERSION" "$ROOT" >/dev/null
done
# A dynamically linked busybox (Debian's busybox, not busybox-static) would not run FROM scratch;
# curl and git would not without every library they link.
# Under runc by name: the runtime shim refuses a component's image run outside its stack.
docker run --rm --runtime runc --network none --entrypoint /bin/sh "sharness/agent:$TAG" \
	-c 'curl --version >/dev/null && git --version >/dev/null' \
	|| die "the userland does not run in sharness/agent:$TAG (is $BUSYBOX static? a library missing?)"
docker run --rm --runtime runc --network none --entrypoint /bin/bash "sharness/bash:$TAG" \
	-c 'ls / >/dev/null && git --version >/dev/null && curl --version >/dev/null && make --version >/dev/null && strace -V >/dev/null' \
	|| die "the userland does not run in sharness/bash:$TAG (a library missing?)"
for c in "${COMPONENTS[@]}"; do
	printf 'sharness/%s:%s\t%s bytes\n' "$c" "$TAG" \
		"$(docker image inspect -f '{{.Size}}' "sharness/$c:$TAG")"
done
