#!/usr/bin/env bash
# soak.sh: issue 22's soak on a real engine: the offline world's stack under 60 s of load from
# the agent's seat (1,000 tunnel workers through net, 100 llm streams of long answers, 20 bash
# calls with large outputs, fs writes in a loop), every component measured on the host before,
# during and a minute after, and the audit record verified and counted at the end (e2e
# TestSoak). All traffic stays inside the stack's own networks and the offline world; the run is
# bounded (about four minutes on two cores, the stack's start included) and stops by itself.
#
# Usage: hack/soak.sh [go test flags...]      e.g. SHARNESS_SOAK_TUNNELS=200 hack/soak.sh
#
# It runs hack/e2e.sh -run 'TestSoak$' (which installs, starts and stops an engine as it does)
# and writes the results as JSON, with the date and the machine's load, to SOAK_OUT (default
# hack/bench/results/soak-<UTC date>.json; git-ignored). docs/load.md records the last run.
#
# Environment (each a number; the defaults are issue 22's):
#   SHARNESS_SOAK_SECONDS (60), SHARNESS_SOAK_TUNNELS (1000), SHARNESS_SOAK_STREAMS (100),
#   SHARNESS_SOAK_SHELL (20), SHARNESS_SOAK_FS (2), SHARNESS_SOAK_BULK_BYTES (4194304),
#   SHARNESS_SOAK_STREAM_WORDS (300), SHARNESS_SOAK_STREAM_PACE_MS (10),
#   SHARNESS_SOAK_SHELL_BYTES (1048576), SHARNESS_SOAK_SETTLE_SECONDS (60: the quiet minute after
#   which descriptors and threads must be back within 10 % of idle)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${SOAK_OUT:-$ROOT/hack/bench/results/soak-$(date -u +%Y%m%dT%H%M%SZ).json}
mkdir -p "$(dirname "$OUT")"
export SHARNESS_SOAK=1 SHARNESS_SOAK_OUT=$OUT
status=0
"$ROOT/hack/e2e.sh" -run 'TestSoak$' "$@" || status=$?
if [ -s "$OUT" ]; then
	printf 'soak: results in %s\n' "$OUT" >&2
fi
exit "$status"
