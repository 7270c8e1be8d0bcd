#!/usr/bin/env bash
# test.sh: every test. The unit gate (hack/check.sh: gofmt, vet, staticcheck, go test -race), the
# end-to-end suite on each real Docker engine (hack/e2e.sh, which also installs Debian's chromium:
# Debian's docker.io, then the current engine hack/engine-current.sh builds, docs/engines.md), a
# comparison of the two runs' doors (hack/doors.sh: every door's verdict must be the same on
# both), and the dashboard's browser test in that chromium. .ci/run calls exactly this.
#
# SHARNESS_E2E_ENGINES lists the engines, in order (default "debian current"; "debian" alone is
# the old, shorter run). SHARNESS_E2E_DOORS_DIR keeps each run's doors-<engine>.jsonl (default: a
# fresh temporary folder, printed).
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/hack/check.sh"
read -r -a engines <<<"${SHARNESS_E2E_ENGINES:-debian current}"
doors=${SHARNESS_E2E_DOORS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/sharness-doors.XXXXXX")}
mkdir -p "$doors"
failed=()
for e in "${engines[@]}"; do
	echo "test: e2e on the $e engine (doors in $doors/doors-$e.jsonl)" >&2
	rm -f "$doors/doors-$e.jsonl"
	started=$SECONDS
	# One engine at a time: each run stops the engine it started before the next starts its own.
	if SHARNESS_ENGINE=$e SHARNESS_E2E_DOORS=$doors/doors-$e.jsonl "$ROOT/hack/e2e.sh"; then
		echo "test: e2e on the $e engine passed in $((SECONDS - started)) s" >&2
	else
		echo "test: e2e on the $e engine FAILED after $((SECONDS - started)) s" >&2
		failed+=("$e")
	fi
done
[ ${#failed[@]} -eq 0 ] || {
	echo "test: e2e failed on: ${failed[*]}" >&2
	exit 1
}
for e in "${engines[@]:1}"; do
	"$ROOT/hack/doors.sh" diff "$doors/doors-${engines[0]}.jsonl" "$doors/doors-$e.jsonl"
done
(cd "$ROOT" && go test -tags browser -count=1 ./host/dashboard/)
