#!/usr/bin/env bash
# engine-current.sh: build a current Docker Engine (Engine 29's line) from the Go module proxy
# into a cached prefix, for `SHARNESS_ENGINE=current hack/engine.sh` (docs/engines.md).
#
# Usage: hack/engine-current.sh build|prefix|versions
#
#   build     builds what is missing or at another version into $SHARNESS_ENGINE_PREFIX/bin:
#             dockerd and docker-proxy (github.com/moby/moby/v2), containerd and
#             containerd-shim-runc-v2 (github.com/containerd/containerd/v2), runc
#             (github.com/opencontainers/runc, cgo with Debian's libseccomp-dev), docker-init
#             (Debian's tini-static) and the buildx CLI plugin (github.com/docker/buildx, to
#             ~/.docker/cli-plugins/docker-buildx, so `docker build` uses dockerd's BuildKit).
#             Each binary is skipped when its stamp says it was built at the wanted version.
#   prefix    prints the prefix (the bin/ folder hack/engine.sh puts first on dockerd's PATH)
#   versions  prints the module versions it builds
#
# Nothing but the Go module proxy and Debian's packages is reached. Every module builds in a
# writable copy of its module directory with GOWORK=off GOFLAGS=-mod=mod (the module cache is
# read-only and -mod=mod may rewrite go.sum), as hack/engine.sh builds compose.
#
# Environment:
#   SHARNESS_MOBY_VERSION        default v2.0.0-beta.24 (Engine 29's line)
#   SHARNESS_CONTAINERD_VERSION  default v2.3.5 (what that moby's go.mod requires)
#   SHARNESS_RUNC_VERSION        default v1.4.4
#   SHARNESS_BUILDX_VERSION      default v0.38.2; "none" builds no buildx (the legacy builder then)
#   SHARNESS_ENGINE_PREFIX       default /opt/sharness-engine/$SHARNESS_MOBY_VERSION
set -euo pipefail

MOBY_VERSION=${SHARNESS_MOBY_VERSION:-v2.0.0-beta.24}
CONTAINERD_VERSION=${SHARNESS_CONTAINERD_VERSION:-v2.3.5}
RUNC_VERSION=${SHARNESS_RUNC_VERSION:-v1.4.4}
BUILDX_VERSION=${SHARNESS_BUILDX_VERSION:-v0.38.2}
PREFIX=${SHARNESS_ENGINE_PREFIX:-/opt/sharness-engine/$MOBY_VERSION}
BIN=$PREFIX/bin
BUILDX_PLUGIN=$HOME/.docker/cli-plugins/docker-buildx

log() { printf 'engine-current: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# fresh NAME VERSION: true when $BIN/NAME was built at VERSION.
fresh() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.version" 2>/dev/null)" = "$2" ]; }

# module_copy MODULE VERSION: downloads MODULE@VERSION and prints a writable copy's path.
module_copy() {
	local src dir
	src=$(mktemp -d "${TMPDIR:-/tmp}/sharness-engine-src.XXXXXX")
	# From an empty directory, so no enclosing go.mod or go.work is consulted.
	dir=$(cd "$src" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$1@$2" \
		| sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	[ -n "$dir" ] && [ -d "$dir" ] || die "go mod download $1@$2: no module directory"
	cp -R "$dir/." "$src"
	chmod -R u+w "$src"
	echo "$src"
}

# gobuild DIR OUT PACKAGE [go build flags...]: go build in DIR, installed as $BIN/OUT.
gobuild() {
	local dir=$1 out=$2 pkg=$3
	shift 3
	(cd "$dir" && GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath "$@" -o "$BIN/$out.tmp" "$pkg")
	mv "$BIN/$out.tmp" "$BIN/$out"
}

build_moby() {
	fresh dockerd "$MOBY_VERSION" && fresh docker-proxy "$MOBY_VERSION" && return
	local started=$SECONDS src pkg=github.com/moby/moby/v2
	log "building dockerd and docker-proxy $MOBY_VERSION"
	src=$(module_copy "$pkg" "$MOBY_VERSION")
	# moby's hack/make.sh tags for a static build (journald logging wants cgo: left out).
	local ver=${MOBY_VERSION#v} tags="netgo osusergo static_build nri_no_wasm"
	local ld="-s -w -X $pkg/dockerversion.Version=$ver -X $pkg/dockerversion.GitCommit=$MOBY_VERSION"
	CGO_ENABLED=0 gobuild "$src" dockerd ./cmd/dockerd -tags "$tags" -ldflags "$ld"
	CGO_ENABLED=0 gobuild "$src" docker-proxy ./cmd/docker-proxy -tags "$tags" -ldflags "$ld"
	rm -rf "$src"
	echo "$MOBY_VERSION" >"$BIN/.dockerd.version"
	echo "$MOBY_VERSION" >"$BIN/.docker-proxy.version"
	log "dockerd and docker-proxy built in $((SECONDS - started)) s"
}

build_containerd() {
	fresh containerd "$CONTAINERD_VERSION" && fresh containerd-shim-runc-v2 "$CONTAINERD_VERSION" && return
	local started=$SECONDS src pkg=github.com/containerd/containerd/v2
	log "building containerd and containerd-shim-runc-v2 $CONTAINERD_VERSION"
	src=$(module_copy "$pkg" "$CONTAINERD_VERSION")
	local ld="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg"
	# Static and without the btrfs snapshotter (it wants cgo and libbtrfs).
	CGO_ENABLED=0 gobuild "$src" containerd ./cmd/containerd -tags "urfave_cli_no_docs no_btrfs" -ldflags "$ld"
	CGO_ENABLED=0 gobuild "$src" containerd-shim-runc-v2 ./cmd/containerd-shim-runc-v2 \
		-tags urfave_cli_no_docs -ldflags "$ld"
	rm -rf "$src"
	echo "$CONTAINERD_VERSION" >"$BIN/.containerd.version"
	echo "$CONTAINERD_VERSION" >"$BIN/.containerd-shim-runc-v2.version"
	log "containerd and containerd-shim-runc-v2 built in $((SECONDS - started)) s"
}

build_runc() {
	fresh runc "$RUNC_VERSION" && return
	local started=$SECONDS src
	log "building runc $RUNC_VERSION (cgo, libseccomp)"
	dpkg -s libseccomp-dev >/dev/null 2>&1 || need_debian libseccomp-dev
	src=$(module_copy github.com/opencontainers/runc "$RUNC_VERSION")
	CGO_ENABLED=1 gobuild "$src" runc . -tags "seccomp urfave_cli_no_docs" \
		-ldflags "-s -w -X main.gitCommit=$RUNC_VERSION"
	rm -rf "$src"
	echo "$RUNC_VERSION" >"$BIN/.runc.version"
	log "runc built in $((SECONDS - started)) s: $("$BIN/runc" --version | head -n1)"
}

# docker-init: Debian's tini-static (the engine's `init: true` runs it as the container's pid 1).
build_init() {
	[ -x /usr/bin/tini-static ] || need_debian tini
	install -m 0755 /usr/bin/tini-static "$BIN/docker-init"
}

build_buildx() {
	[ "$BUILDX_VERSION" = none ] && return
	if [ -x "$BUILDX_PLUGIN" ] && [ "$(cat "$BIN/.docker-buildx.version" 2>/dev/null)" = "$BUILDX_VERSION" ]; then
		return
	fi
	local started=$SECONDS src pkg=github.com/docker/buildx
	log "building buildx $BUILDX_VERSION (the docker CLI's BuildKit client)"
	src=$(module_copy "$pkg" "$BUILDX_VERSION")
	mkdir -p "$(dirname "$BUILDX_PLUGIN")"
	(cd "$src" && CGO_ENABLED=0 GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
		-ldflags "-s -w -X $pkg/version.Version=$BUILDX_VERSION -X $pkg/version.Package=$pkg" \
		-o "$BUILDX_PLUGIN.tmp" ./cmd/buildx)
	mv "$BUILDX_PLUGIN.tmp" "$BUILDX_PLUGIN"
	echo "$BUILDX_VERSION" >"$BIN/.docker-buildx.version"
	rm -rf "$src"
	log "buildx built in $((SECONDS - started)) s"
}

need_debian() {
	[ "$(id -u)" -eq 0 ] || die "$* missing: apt-get install -y $*"
	log "installing $* from Debian"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 \
		|| die "could not install $*"
}

cmd_build() {
	command -v go >/dev/null 2>&1 || export PATH=/usr/local/go/bin:$PATH
	command -v go >/dev/null 2>&1 || die "go is needed to build the engine"
	mkdir -p "$BIN"
	local started=$SECONDS
	build_moby
	build_containerd
	build_runc
	build_init
	build_buildx
	log "engine in $BIN ($((SECONDS - started)) s): $("$BIN/dockerd" --version)"
}

case "${1:-}" in
build) cmd_build ;;
prefix) echo "$BIN" ;;
versions)
	printf 'moby %s\ncontainerd %s\nrunc %s\nbuildx %s\n' "$MOBY_VERSION" "$CONTAINERD_VERSION" \
		"$RUNC_VERSION" "$BUILDX_VERSION"
	;;
*)
	echo "usage: $0 build|prefix|versions" >&2
	exit 2
	;;
esac
