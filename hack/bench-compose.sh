#!/usr/bin/env bash
# bench-compose.sh: time `docker compose up -d --wait` of the default stack with the offline
# world (compose/world/docker-compose.yml, the world's policy, + compose/world.yml) until every
# service is running or healthy,
# against starting the same number of plain containers (`docker run -d` of busybox sleep from
# the agent image, the only image with a userland), in the same run (issue 3, "Benchmarks").
# Several repetitions, interleaved; medians and their ratio. A measurement, not a test.
#
# Usage: hack/bench-compose.sh       (the engine up, the images built: hack/build-images.sh)
#
# It uses its own compose project (sharness-bench) and labels its plain containers, removes
# only those (`down -v`, `docker rm -f` by label) and never starts or stops the engine. It
# refuses to run while another stack holds the stack's fixed subnets (10.213.0.0/16, 10.214.0.0/24).
#
# Environment:
#   BENCH_COMPOSE_REPS   repetitions (default 5)
#   BENCH_OUT            JSON results file (default hack/bench/results/compose-<UTC date>.json)
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${BENCH_COMPOSE_REPS:-5}
PROJECT=sharness-bench
LABEL=ai.sharness.bench=compose-plain-$$
PLAIN_IMAGE=sharness/agent:dev
OUT=${BENCH_OUT:-$ROOT/hack/bench/results/compose-$(date -u +%Y%m%dT%H%M%SZ).json}

log() { printf 'bench-compose: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
compose() { docker compose -p "$PROJECT" -f compose/world/docker-compose.yml -f compose/world.yml "$@"; }
now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

cd "$ROOT"
docker info >/dev/null 2>&1 || die "no Docker engine answers: start one (hack/engine.sh start); this script never starts or stops it"
docker compose version >/dev/null 2>&1 || die "no docker compose plugin: hack/engine.sh install builds it"
SHARNESS_AI_POLICY_HASH=$(go run ./cmd/sharness-ai -f policies/world/manifest.yaml hash)
export SHARNESS_AI_POLICY_HASH
eval "$(go run ./testkit/worldca)"

services=$(compose config --services)
n=$(printf '%s\n' "$services" | wc -l)
missing=$(compose config --images | sort -u | while read -r img; do
	docker image inspect "$img" >/dev/null 2>&1 || printf '%s ' "$img"
done | sed 's/ $//')
[ -z "$missing" ] || die "the default stack cannot come up: image(s) missing: $missing (build them with hack/build-images.sh)"
[ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")" ] \
	|| die "compose project $PROJECT already has containers: remove them with 'docker compose -p $PROJECT down -v'"
held=$(docker network ls -q | xargs -r docker network inspect -f '{{.Name}} {{range .IPAM.Config}}{{.Subnet}} {{end}}' \
	| grep -E ' 10\.(213|214)\.' || true)
[ -z "$held" ] || die "$(printf 'refusing to run: another stack holds the default stack'"'"'s subnets:\n%s' "$held")"

WORK=$(mktemp -d /tmp/sharness-bench-compose.XXXXXX)
# The session the runtime shim holds every component to: a throwaway workspace and secrets folder.
export SHARNESS_AI_WORKSPACE=$WORK/workspace SHARNESS_AI_SECRETS_DIR=$WORK/secrets
mkdir -p "$SHARNESS_AI_WORKSPACE" "$SHARNESS_AI_SECRETS_DIR"
chown 65532:65532 "$SHARNESS_AI_WORKSPACE"
go run ./cmd/sharness-ai -f policies/world/manifest.yaml workspace init --dir "$SHARNESS_AI_WORKSPACE" >/dev/null
go run ./cmd/sharness-ai -f policies/world/manifest.yaml session record -p "$PROJECT" --dir compose/world >/dev/null
cleanup() {
	compose down -v --remove-orphans >/dev/null 2>&1 || true
	docker ps -aq --filter "label=$LABEL" | xargs -r docker rm -f >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "$n services ($(printf '%s\n' "$services" | paste -sd ' ')); $REPS repetitions of: compose up --wait, down -v; $n × docker run -d, rm -f"
stack=() plain=()
for i in $(seq "$REPS"); do
	t0=$(now)
	if ! compose up -d --wait --wait-timeout 120 >"$WORK/up.log" 2>&1; then
		t1=$(now)
		cat "$WORK/up.log" >&2
		compose ps -a >&2 || true
		compose logs --no-color --tail 20 >&2 || true
		die "the default stack did not come up (repetition $i, after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s): see above; nothing to compare yet"
	fi
	t1=$(now)
	not_up=$(compose ps -a --format '{{.Service}} {{.State}} {{.Health}}' | awk '$2 != "running" || ($3 != "" && $3 != "healthy")')
	[ -z "$not_up" ] || die "$(printf 'compose up --wait returned, but not every service is running/healthy:\n%s' "$not_up")"
	# When each container started, from the engine's clock, relative to the start of `up`:
	# where the time goes (networks and volumes first, then the launcher's health before the rest).
	starts=$(compose ps -aq | xargs docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.StartedAt}}' \
		| while read -r svc at; do printf '%s +%.2fs ' "$svc" "$(awk -v a="$t0" -v b="$(date -d "$at" +%s.%N)" 'BEGIN{print b-a}')"; done | sed 's/ $//')
	compose down -v >/dev/null 2>&1

	t2=$(now)
	for _ in $(seq "$n"); do
		docker run -d --label "$LABEL" --entrypoint /bin/sleep "$PLAIN_IMAGE" 600 >/dev/null
	done
	t3=$(now)
	running=$(docker ps -q --filter "label=$LABEL" --filter status=running | wc -l)
	[ "$running" -eq "$n" ] || die "only $running of $n plain containers are running"
	docker ps -aq --filter "label=$LABEL" | xargs -r docker rm -f >/dev/null

	stack+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')")
	plain+=("$(awk -v a="$t2" -v b="$t3" 'BEGIN{printf "%.3f", b-a}')")
	log "repetition $i: stack ${stack[-1]} s (started: $starts), $n plain containers ${plain[-1]} s"
done

ms=$(printf '%s\n' "${stack[@]}" | median)
mp=$(printf '%s\n' "${plain[@]}" | median)
ratio=$(awk -v a="$ms" -v b="$mp" 'BEGIN{printf "%.2f", a/b}')
printf '\ndocker compose up -d --wait of the default stack + world (%d services) vs %d × docker run -d (busybox sleep)\n' "$n" "$n"
printf '  %-28s %8s s   runs: %s\n' "compose up --wait (median)" "$ms" "${stack[*]}"
printf '  %-28s %8s s   runs: %s\n' "plain docker run (median)" "$mp" "${plain[*]}"
printf '  %-28s %8s ×\n' "ratio stack / plain" "$ratio"
mkdir -p "$(dirname "$OUT")"
printf '{"date":"%s","services":%d,"reps":%d,"stack_s":[%s],"plain_s":[%s],"stack_median_s":%s,"plain_median_s":%s,"ratio":%s,"docker":"%s","compose":"%s"}\n' \
	"$(date -u +%FT%TZ)" "$n" "$REPS" "$(IFS=,; echo "${stack[*]}")" "$(IFS=,; echo "${plain[*]}")" "$ms" "$mp" "$ratio" \
	"$(docker version -f '{{.Server.Version}}')" "$(docker compose version --short)" >"$OUT"
log "results in $OUT"
