#!/usr/bin/env bash
# bench-net.sh: measure net, the egress proxy, against a direct connection, a minimal stdlib
# proxy and stripe/smokescreen, on this machine, in one run (issue 3, "Benchmarks"). A
# measurement, not a test: it prints a table of figures with their ratios to the stdlib proxy
# and to smokescreen, and writes them as JSON; it never fails because the machine is slow.
#
# Usage: sudo hack/bench-net.sh [netbench flags...]    e.g. hack/bench-net.sh -rounds 1 -n 200
#
# Needs root: it adds SRC (default 10.213.0.2, in the agent's edge subnet: net knows a plain
# caller by its source address) to lo for the run and removes it on exit, and runs net in a
# private mount namespace with the bench's policy at /etc/sharness/policy (net has no flag for
# another policy folder). It refuses to run when 10.213.0.0/16 (pbp.EdgePool) is already
# routed or assigned on this host, or used by a Docker network: a SHarness stack is running.
# All traffic stays on loopback; the run takes about four minutes on two cores and stops by
# itself.
#
# Environment:
#   SMOKESCREEN_VERSION   module version of github.com/stripe/smokescreen (default v0.1.0)
#   BENCH_NET_NOLIMIT     1 (default) also runs net with its per-caller flood brake raised out of
#                         the way (-rate-per-caller 1000000/1000000): a diagnostic peer that tells
#                         the proxy's mechanics from its brake. 0 skips it.
#   BENCH_NET_PROFILE     1 builds net with its diagnostic CPU profiles (testkit/benchprofile:
#                         /tmp/sharness-net-<pid>.<n>.prof, one per 10 s; read with go tool pprof)
#   BENCH_OUT             JSON results file (default hack/bench/results/net-<UTC date>.json;
#                         hack/bench/results/ is git-ignored)
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=10.213.0.2
POOL=10.213.0.0/16
SMOKESCREEN_VERSION=${SMOKESCREEN_VERSION:-v0.1.0}
NOLIMIT=${BENCH_NET_NOLIMIT:-1}
OUT=${BENCH_OUT:-$ROOT/hack/bench/results/net-$(date -u +%Y%m%dT%H%M%SZ).json}

log() { printf 'bench-net: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root: it adds $SRC to lo and runs net in a private mount namespace"
for tool in ip unshare mount; do
	command -v "$tool" >/dev/null || die "needs $tool (iproute2, util-linux)"
done

# The edge pool must be free on this host: a running stack's routes, addresses or networks.
in_use=$(ip -4 route show table all root "$POOL" 2>/dev/null; ip -4 -o addr show to "$POOL" 2>/dev/null)
if [ -n "$in_use" ]; then
	die "$(printf 'refusing to run: %s is already routed or assigned on this host (a running SHarness stack, or a previous run that did not clean up):\n%s\nStop the stack (or remove a leftover %s/32 from lo) and run again.' "$POOL" "$in_use" "$SRC")"
fi
if docker info >/dev/null 2>&1; then
	nets=$(docker network ls -q | xargs -r docker network inspect -f '{{.Name}} {{range .IPAM.Config}}{{.Subnet}} {{end}}' | grep ' 10\.213\.' || true)
	[ -z "$nets" ] || die "$(printf 'refusing to run: Docker networks use %s (a SHarness stack is running):\n%s' "$POOL" "$nets")"
fi

WORK=$(mktemp -d /tmp/sharness-bench-net.XXXXXX)
added=0
cleanup() {
	if [ "$added" -eq 1 ]; then
		ip addr del "$SRC/32" dev lo || log "could not remove $SRC/32 from lo: remove it by hand"
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$ROOT"
log "building sharness-net (CGO_ENABLED=0 -trimpath), sharness-ai and netbench"
CGO_ENABLED=0 go build -trimpath ${BENCH_NET_PROFILE:+-tags netprofile} -o "$WORK/sharness-net" ./images/net
go build -o "$WORK/sharness-ai" ./cmd/sharness-ai
go build ${BENCH_NET_PROFILE:+-tags netprofile} -o "$WORK/netbench" ./hack/bench/netbench
NETVERSION="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- images/net images/net/egress 2>/dev/null || echo +uncommitted-changes)"
nolimit_flag=()
if [ "$NOLIMIT" = 1 ]; then
	nolimit_flag=(-net-nolimit 1000000/1000000) # the same binary, its flood brake out of the way
fi
log "building stripe/smokescreen $SMOKESCREEN_VERSION from the Go module proxy"
GOBIN="$WORK/bin" CGO_ENABLED=0 GOFLAGS=-trimpath go install "github.com/stripe/smokescreen@$SMOKESCREEN_VERSION"

ip addr add "$SRC/32" dev lo
added=1
log "measuring (about four minutes)"
"$WORK/netbench" -work "$WORK" -cli "$WORK/sharness-ai" -net "$WORK/sharness-net" -net-version "$NETVERSION" \
	"${nolimit_flag[@]}" -smokescreen "$WORK/bin/smokescreen" -src "$SRC" -out "$OUT" "$@"
