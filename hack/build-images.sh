#!/usr/bin/env bash
# build-images.sh: build every SHarness image offline, from prebuilt static binaries.
#
# Usage: hack/build-images.sh
#
# Binaries and root file systems go to bin/ (git-ignored, and the only build context the
# .dockerignore lets through); the root Dockerfile then copies them into FROM scratch images
# named sharness/<component>:dev. No registry is contacted.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/bin
BUSYBOX=${SHARNESS_BUSYBOX:-/bin/busybox} # from Debian's busybox-static (hack/engine.sh install)
TAG=dev
VERSION=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo dev)
COMPONENTS=(agent)

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

prepare_agent() {
	local rootfs=$BIN/agent-rootfs
	gobuild ./images/agent "$BIN/sharness-agent"
	rm -rf "$rootfs"
	mkdir -p "$rootfs/etc" "$rootfs/tmp"
	chmod 1777 "$rootfs/tmp"
	cp "$BIN/sharness-agent" "$rootfs/sharness-agent"
	busybox_userland "$rootfs"
	printf 'root:x:0:0:root:/root:/bin/sh\nsharness:x:65532:65532:sharness:/tmp:/bin/false\n' \
		>"$rootfs/etc/passwd"
	printf 'root:x:0:\nsharness:x:65532:\n' >"$rootfs/etc/group"
}

mkdir -p "$BIN"
for c in "${COMPONENTS[@]}"; do
	log "preparing $c"
	"prepare_$c"
	log "building sharness/$c:$TAG"
	# The legacy builder: BuildKit would want the buildx plugin, and neither needs a registry
	# for FROM scratch.
	DOCKER_BUILDKIT=0 docker build --quiet --target "$c" -t "sharness/$c:$TAG" \
		--build-arg VERSION="$VERSION" "$ROOT" >/dev/null
done
# A dynamically linked busybox (Debian's busybox, not busybox-static) would not run FROM scratch.
docker run --rm --network none --entrypoint /bin/sh "sharness/agent:$TAG" -c true \
	|| die "the busybox userland does not run in sharness/agent:$TAG (is $BUSYBOX static?)"
for c in "${COMPONENTS[@]}"; do
	printf 'sharness/%s:%s\t%s bytes\n' "$c" "$TAG" \
		"$(docker image inspect -f '{{.Size}}' "sharness/$c:$TAG")"
done
