#!/usr/bin/env bash
# bench-runtime.sh: what sharness-runtime adds to starting a container, against plain runc, in
# one run (issue 6's benchmark).
#
# Usage: hack/bench-runtime.sh [STARTS] [ROUNDS]   (default 100 starts per round, 2 rounds)
#
# The container is the default stack's agent as the compose file makes it (its seccomp profile,
# mounts, limits and marker), with its entrypoint replaced by `busybox true`, so each start is the
# runtime's create, start and delete of a container that exits at once. Per round, the agent is
# created once under runc and once under the sharness runtime (which checks it against its
# compiled policy, restores the masked paths, binds the Landlock helper in front of the entrypoint
# and hands over to runc; the helper then makes the domain and executes busybox) and started STARTS times
# each; rounds alternate the order. Prints p50 and p99 of `docker start -a` for each and the
# ratio. Needs the engine from hack/engine.sh (the runtime registered), hack/runtime.sh install
# and `sharness-ai install` (as hack/e2e.sh does), and the images.
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
trap 'docker compose -p sharness-bench -f docker-compose.yml -f "$work/o.yml" down -v >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export SHARNESS_AI_POLICY_HASH=$(go run ./cmd/sharness-ai hash)
go run ./cmd/sharness-ai install --replace >/dev/null
export SHARNESS_AI_WORKSPACE=$work/ws SHARNESS_AI_SECRETS_DIR=$work/secrets
mkdir -p "$SHARNESS_AI_WORKSPACE" "$SHARNESS_AI_SECRETS_DIR"
chown 65532:65532 "$SHARNESS_AI_WORKSPACE"
go run ./cmd/sharness-ai workspace init --dir "$SHARNESS_AI_WORKSPACE" >/dev/null

# measure RUNTIME: create the agent under RUNTIME, start it STARTS times, append ms to $work/RUNTIME.
measure() {
	local rt=$1 id i t0 t1
	printf 'services:\n  agent:\n    runtime: %s\n    entrypoint: ["/bin/busybox", "true"]\n    depends_on: !reset {}\n' "$rt" >"$work/o.yml"
	docker compose -p sharness-bench -f docker-compose.yml -f "$work/o.yml" up --no-start --no-deps agent >/dev/null 2>&1
	id=$(docker compose -p sharness-bench -f docker-compose.yml -f "$work/o.yml" ps -a -q agent)
	docker start -a "$id" >/dev/null # warm up, and fail here if the runtime refuses it
	for ((i = 0; i < STARTS; i++)); do
		t0=$(date +%s%N)
		docker start -a "$id" >/dev/null
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000)) >>"$work/$rt"
	done
	docker compose -p sharness-bench -f docker-compose.yml -f "$work/o.yml" down -v >/dev/null 2>&1
}

for ((r = 0; r < ROUNDS; r++)); do
	if ((r % 2 == 0)); then measure runc; measure sharness; else measure sharness; measure runc; fi
done

# pct FILE P: the P-th percentile (nearest rank) of the microsecond samples in FILE, in ms.
pct() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int((p/100)*NR+0.999); if (i<1) i=1; printf "%.1f", a[i]/1000}'; }
r50=$(pct "$work/runc" 50) r99=$(pct "$work/runc" 99) s50=$(pct "$work/sharness" 50) s99=$(pct "$work/sharness" 99)
printf 'container start (create+start+delete, docker start -a), %d starts x %d rounds each\n' "$STARTS" "$ROUNDS"
printf '  runc       p50 %7s ms   p99 %7s ms\n' "$r50" "$r99"
printf '  sharness   p50 %7s ms   p99 %7s ms\n' "$s50" "$s99"
awk -v a="$s50" -v b="$r50" -v c="$s99" -v d="$r99" 'BEGIN {printf "  sharness / runc: p50 %.3f (%+.1f ms), p99 %.3f (%+.1f ms)\n", a/b, a-b, c/d, c-d}'
