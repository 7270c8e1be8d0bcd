#!/usr/bin/env bash
# build-claude-code.sh: build sharness/claude-code:dev, the agent image that runs Claude Code in
# the stack (compose/claude-code.yml, docs/claude-code.md), offline and FROM scratch.
#
# Usage: hack/build-claude-code.sh            build (or rebuild) the image (needs Go, and npm once)
#        hack/build-claude-code.sh --inputs   print the digest of what the image is built from
#                                             (the image carries it as a label; hack/claude-code.sh
#                                             rebuilds when they differ)
#
# Claude Code is a native executable (a Bun single-file build) that npm ships in a per-platform
# package; the @anthropic-ai/claude-code package itself only holds a stub and a postinstall step
# that copies the platform package's binary over it. This script takes the platform package
# directly, at the version and integrity pinned below: `npm pack` fetches it once into
# bin/claude-code/ (the only step that needs the npm registry), and every later build reuses that
# file after checking its integrity again. Nothing runs at install time: no postinstall script,
# no download by Claude Code itself.
#
# The root file system (bin/claude-code/context/rootfs) holds: the claude binary with the shared
# libraries ldd lists for it (glibc, from this machine), the entrypoint sharness-claude (a static
# Go program, images/claude-code), /etc/passwd and /etc/group with uid 65532, Debian's CA bundle,
# and Claude Code's managed settings and MCP configuration from images/claude-code/ at its Linux
# managed path, /etc/claude-code/. Nothing else: no shell and no other program, so that nothing
# Claude Code may be told to run (a project's apiKeyHelper, a hook) finds one. The image is built
# with the legacy builder from images/claude-code/Dockerfile; no registry is contacted.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$ROOT/bin/claude-code
CONTEXT=$WORK/context # the build context: rootfs/ alone
ROOTFS=$CONTEXT/rootfs
IMAGE=sharness/claude-code:dev
VERSION=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo dev)

# The pin: change all three together, from `npm view <package>@<version> dist.integrity`.
CLAUDE_CODE_VERSION=2.1.332
CLAUDE_CODE_PACKAGE=@anthropic-ai/claude-code-linux-x64
CLAUDE_CODE_INTEGRITY=sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw==
TARBALL=$WORK/npm/anthropic-ai-claude-code-linux-x64-$CLAUDE_CODE_VERSION.tgz

# inputs: the digest of everything the image is made from that lives in this repository: this
# script (with the pin) and every file of images/claude-code/, by name and content.
inputs() {
	(cd "$ROOT" && find hack/build-claude-code.sh images/claude-code -type f -print0 | LC_ALL=C sort -z \
		| xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}
if [ "${1:-}" = --inputs ]; then
	inputs
	exit 0
fi
[ $# -eq 0 ] || { echo "usage: hack/build-claude-code.sh [--inputs]" >&2; exit 2; }

log() { printf 'build-claude-code: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# integrity FILE: the file's npm integrity string (Subresource Integrity form, sha512).
integrity() {
	printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"
}

# copy_libs ROOTFS FILE: every shared library ldd lists for FILE and the dynamic loader,
# dereferenced, at their paths in ROOTFS. It is the inner loop of hack/build-images.sh's copy_elf
# (that script builds when sourced, so it cannot be sourced for its functions); the 400 MB binary
# itself is written to its place once, not copied there again.
copy_libs() {
	local rootfs=$1 lib
	for lib in $(ldd "$2" | grep -o '/[^ ]*'); do
		[ -e "$rootfs$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
	done
}

[ "$(uname -m)" = x86_64 ] || die "only linux-x64 is pinned (this machine is $(uname -m)): pin the matching @anthropic-ai/claude-code-linux-* package"
command -v openssl >/dev/null || die "openssl missing: apt-get install -y openssl"
command -v go >/dev/null || die "go missing: it builds the entrypoint"
[ -r /etc/ssl/certs/ca-certificates.crt ] || die "/etc/ssl/certs/ca-certificates.crt missing: apt-get install -y ca-certificates"
mkdir -p "$WORK/npm"

if [ ! -f "$TARBALL" ] || [ "$(integrity "$TARBALL")" != "$CLAUDE_CODE_INTEGRITY" ]; then
	command -v npm >/dev/null || die "npm missing: apt-get install -y npm (it fetches $CLAUDE_CODE_PACKAGE once)"
	log "fetching $CLAUDE_CODE_PACKAGE@$CLAUDE_CODE_VERSION from the npm registry (about 190 MB)"
	rm -f "$TARBALL"
	(cd "$WORK/npm" && npm pack --silent "$CLAUDE_CODE_PACKAGE@$CLAUDE_CODE_VERSION" >/dev/null) \
		|| die "npm pack $CLAUDE_CODE_PACKAGE@$CLAUDE_CODE_VERSION failed"
fi
got=$(integrity "$TARBALL")
[ "$got" = "$CLAUDE_CODE_INTEGRITY" ] || die "$TARBALL has integrity $got, want $CLAUDE_CODE_INTEGRITY: refusing it"
log "$CLAUDE_CODE_PACKAGE@$CLAUDE_CODE_VERSION, integrity $got"

tar -xzOf "$TARBALL" package/package.json | grep -q "\"version\": \"$CLAUDE_CODE_VERSION\"" \
	|| die "the tarball's package.json does not say version $CLAUDE_CODE_VERSION"
rm -rf "$CONTEXT"
mkdir -p "$ROOTFS/etc/claude-code" "$ROOTFS/etc/ssl/certs" "$ROOTFS/home/claude" "$ROOTFS/workspace" \
	"$ROOTFS/tmp" "$ROOTFS/usr/local/bin"
# Both are tmpfs mounts in the stack (the agent's policy): runc copies the image's folder up into
# the tmpfs, mode included, so the folder's mode is the mount's. HOME must be writable by 65532.
chmod 1777 "$ROOTFS/tmp" "$ROOTFS/home/claude"
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ROOTFS/usr/local/bin/sharness-claude" ./images/claude-code)
tar -xzOf "$TARBALL" package/claude >"$ROOTFS/usr/local/bin/claude"
chmod 0755 "$ROOTFS/usr/local/bin/claude"
copy_libs "$ROOTFS" "$ROOTFS/usr/local/bin/claude"
install -m 0644 "$ROOT/images/claude-code/managed-settings.json" "$ROOT/images/claude-code/managed-mcp.json" \
	"$ROOTFS/etc/claude-code/"
cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nclaude:x:65532:65532:claude:/home/claude:/sbin/nologin\n' >"$ROOTFS/etc/passwd"
printf 'root:x:0:\nclaude:x:65532:\n' >"$ROOTFS/etc/group"

log "building $IMAGE"
DOCKER_BUILDKIT=0 docker build --quiet -t "$IMAGE" -f "$ROOT/images/claude-code/Dockerfile" \
	--build-arg VERSION="$VERSION" --build-arg CLAUDE_CODE_VERSION="$CLAUDE_CODE_VERSION" \
	--build-arg CLAUDE_CODE_INTEGRITY="$CLAUDE_CODE_INTEGRITY" --build-arg INPUTS="$(inputs)" "$CONTEXT" >/dev/null
# The binary must run FROM scratch with what was copied (a missing library shows here), as the
# stack runs it: read-only, unprivileged, without a network.
got=$(docker run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges:true \
	--entrypoint /usr/local/bin/claude "$IMAGE" --version) \
	|| die "claude --version fails in $IMAGE"
case $got in "$CLAUDE_CODE_VERSION "*) ;; *) die "claude --version in $IMAGE says '$got', want $CLAUDE_CODE_VERSION" ;; esac
printf '%s\t%s bytes\tClaude Code %s\n' "$IMAGE" "$(docker image inspect -f '{{.Size}}' "$IMAGE")" "$CLAUDE_CODE_VERSION"
