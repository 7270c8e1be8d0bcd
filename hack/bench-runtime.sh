#!/usr/bin/env bash
# bench-runtime.sh: what sharness-runtime adds to starting a container, against plain runc, in
# one run (issues 6 and 16's benchmark).
#
# Usage: hack/bench-runtime.sh [STARTS] [ROUNDS]   (default 100 × 2: 200 starts of each)
#
# The container is the default stack's agent as the compose file makes it (its seccomp profile,
# mounts, limits and marker), with its entrypoint replaced by `busybox true`, so each start is the
# runtime's create, start and delete of a container that exits at once. The agent is created once
# under runc and once under the sharness runtime, and the two are started in turns, STARTS ×
# ROUNDS times each, each pair in alternating order. Under the sharness runtime, each start is
# four runc commands through the shim (create, start, delete, and containerd's delete --force):
# the create goes on to the policy check, which checks the spec against its compiled policy,
# restores the masked paths, binds the Landlock helper in front of the entrypoint and hands over
# to runc; the other three go to runc at once; the helper then makes the domain and executes
# busybox. Prints p50 and p99 of `docker start -a` for each, what the shim adds at each (ms) and
# the ratio, and the p50 and p99 of the paired differences (each start against the other
# runtime's next to it). Needs the engine from
# hack/engine.sh (the runtime registered), hack/runtime.sh install and `sharness-ai install` (as
# hack/e2e.sh does), and the images.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STARTS=${1:-100}
ROUNDS=${2:-2}
cd "$ROOT"
command -v go >/dev/null 2>&1 || export PATH=/usr/local/go/bin:$PATH
docker info --format '{{json .Runtimes}}' | grep -q '"sharness"' \
	|| { echo "bench-runtime: the engine has no runtime \"sharness\" (hack/engine.sh stop; hack/runtime.sh install; hack/engine.sh start)" >&2; exit 1; }

work=$(mktemp -d)
# The two agents are services of one project (the compose file pins its networks' subnets, so a
# second project could not have them): agent under the sharness runtime, agent-runc under runc.
compose() { docker compose -p sharness-bench -f docker-compose.yml -f "$work/o.yml" "$@"; }
trap '[ ! -e "$work/o.yml" ] || compose down -v >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export SHARNESS_AI_POLICY_HASH=$(go run ./cmd/sharness-ai hash)
go run ./cmd/sharness-ai install --replace >/dev/null
export SHARNESS_AI_WORKSPACE=$work/ws SHARNESS_AI_SECRETS_DIR=$work/secrets
mkdir -p "$SHARNESS_AI_WORKSPACE" "$SHARNESS_AI_SECRETS_DIR"
chown 65532:65532 "$SHARNESS_AI_WORKSPACE"
go run ./cmd/sharness-ai workspace init --dir "$SHARNESS_AI_WORKSPACE" >/dev/null
# The session the shim holds the agent to (its workspace and policy).
go run ./cmd/sharness-ai session record -p sharness-bench >/dev/null

# create SERVICE: SERVICE's container, started once (a warm-up, and a refusal fails here); prints
# its id.
create() {
	local id
	id=$(compose ps -a -q "$1")
	docker start -a "$id" >/dev/null
	echo "$id"
}
# start ID FILE: one `docker start -a` of ID, its microseconds appended to FILE.
start() {
	local t0 t1
	t0=$(date +%s%N)
	docker start -a "$1" >/dev/null
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000)) >>"$2"
}

# The two containers start in turns, each pair in alternating order, so that what else the
# machine does at the time weighs on both alike; the paired differences are a third measure.
cat >"$work/o.yml" <<EOF
services:
  agent:
    runtime: sharness
    entrypoint: ["/bin/busybox", "true"]
    depends_on: !reset {}
  agent-runc:
    extends: {file: $ROOT/docker-compose.yml, service: agent}
    runtime: runc
    entrypoint: ["/bin/busybox", "true"]
    depends_on: !reset {}
EOF
compose up --no-start --no-deps agent agent-runc >/dev/null 2>"$work/up.err" || { cat "$work/up.err" >&2; exit 1; }
runc_id=$(create agent-runc)
shim_id=$(create agent)
for ((i = 0; i < STARTS * ROUNDS; i++)); do
	if ((i % 2 == 0)); then start "$runc_id" "$work/runc"; start "$shim_id" "$work/sharness"
	else start "$shim_id" "$work/sharness"; start "$runc_id" "$work/runc"; fi
done
paste "$work/sharness" "$work/runc" | awk '{print $1 - $2}' >"$work/diff"

# The floor of this design, measured beside it: what the shim adds before its policy check does
# any work. Each of the three other runc commands costs one more program start (the dispatcher,
# before it executes runc: `sharness-runtime state` against `runc state` of a container that is
# not there), and the container's process one more (the Landlock helper, under a domain that lets
# it execute itself, starting itself again, against the helper started once: a static program is
# what any host has to execute under that domain). In turns, 200 times each.
runtime_bin=$(docker info --format '{{json .Runtimes}}' | sed -n 's/.*"sharness":{"path":"\([^"]*\)".*/\1/p')
[ -n "$runtime_bin" ] || { echo "bench-runtime: the engine names no path for the runtime \"sharness\"" >&2; exit 1; }
helper=${SHARNESS_RUNTIME_LANDLOCK:-/usr/local/lib/sharness-ai/sharness-landlock}
# elapsed FILE CMD...: CMD's wall time in microseconds appended to FILE (bash's own clock, no
# program started to read it).
elapsed() {
	local f=$1 t0 t1
	shift
	t0=${EPOCHREALTIME/./}
	"$@" >/dev/null 2>&1 || true
	t1=${EPOCHREALTIME/./}
	echo $((t1 - t0)) >>"$f"
}
for ((i = 0; i < 200; i++)); do
	elapsed "$work/f-runc" runc state sharness-bench-none
	elapsed "$work/f-dispatch" "$runtime_bin" state sharness-bench-none
	elapsed "$work/f-once" "$helper"
	elapsed "$work/f-helper" "$helper" "enforce x${#helper}:$helper" -- "$helper"
done

# pct FILE P: the P-th percentile (nearest rank) of the microsecond samples in FILE, in ms.
pct() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int((p/100)*NR+0.999); if (i<1) i=1; printf "%.1f", a[i]/1000}'; }
r50=$(pct "$work/runc" 50) r99=$(pct "$work/runc" 99) s50=$(pct "$work/sharness" 50) s99=$(pct "$work/sharness" 99)
printf 'container start (create+start+delete, docker start -a), %d starts each, in turns\n' "$((STARTS * ROUNDS))"
printf '  runc       p50 %7s ms   p99 %7s ms\n' "$r50" "$r99"
printf '  sharness   p50 %7s ms   p99 %7s ms\n' "$s50" "$s99"
awk -v a="$s50" -v b="$r50" -v c="$s99" -v d="$r99" 'BEGIN {printf "  added by the shim: p50 %+.1f ms (x%.3f), p99 %+.1f ms (x%.3f)\n", a-b, a/b, c-d, c/d}'
# pct of signed differences: sort -n handles the minus sign.
printf '  paired (sharness - runc, start by start): p50 %+.1f ms, p99 %+.1f ms\n' "$(pct "$work/diff" 50)" "$(pct "$work/diff" 99)"
fr=$(pct "$work/f-runc" 50) fd=$(pct "$work/f-dispatch" 50) ft=$(pct "$work/f-once" 50) fh=$(pct "$work/f-helper" 50)
printf 'the floor of a runtime shim and a helper (p50, 200 each, in turns)\n'
printf '  runc state %s ms, through the dispatcher %s ms; the helper %s ms, through the helper %s ms\n' "$fr" "$fd" "$ft" "$fh"
awk -v r="$fr" -v d="$fd" -v t="$ft" -v h="$fh" 'BEGIN {printf "  floor: 3 x %.1f + %.1f = %.1f ms added before the check does any work\n", d-r, h-t, 3*(d-r)+(h-t)}'
