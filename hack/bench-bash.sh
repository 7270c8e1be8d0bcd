#!/usr/bin/env bash
# bench-bash.sh: what a bash sandbox costs, against the named baselines, in one interleaved run.
#
# Usage: hack/bench-bash.sh [RUNS]   (default 200 runs of each variant)
#
# Measures, per command, p50 and p90 of: plain `bash -c true`, unshare(1) (--user
# --map-root-user --pid --net --mount --fork), bwrap (--unshare-all --ro-bind / / --dev /dev
# --proc /proc) and our sandbox (analyse) for `true` and for `cat` of a 1 MB file, then the cost
# each adds to plain bash and our added cost ÷ unshare's and ÷ bwrap's (images/bash/sandbox's
# BenchmarkSandbox). Then the same sandbox with sharness-bash's set of packages as its init, and
# a whole tool call through MCP (images/bash's BenchmarkBashTool), with the ratio of a 1 MB cat
# through the tool to the same cat by plain bash (issue 21's goal: 2 at most).
#
# The test binaries are built static (CGO_ENABLED=0) like the images' binaries: the sandbox's
# init is a fresh start of the binary, and a dynamically linked one starts slower. Installs
# Debian's bubblewrap if missing (as root). Needs unprivileged user namespaces. Numbers from a
# busy machine are noisy: every variant runs interleaved, so a busy moment slows them alike.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."
RUNS=${1:-200}

log() { printf 'bench-bash: %s\n' "$*" >&2; }

if ! command -v bwrap >/dev/null; then
	if [ "$(id -u)" -eq 0 ]; then
		log "installing bubblewrap from Debian"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap >&2
	else
		log "bwrap missing (apt-get install -y bubblewrap): it will not be measured"
	fi
fi
command -v unshare >/dev/null || log "unshare missing (util-linux): it will not be measured"

log "kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RUNS runs each"
echo "== sandbox (images/bash/sandbox BenchmarkSandbox; init: the package's test binary)"
CGO_ENABLED=0 go test -run '^$' -bench '^BenchmarkSandbox$' -benchtime "${RUNS}x" -count 1 ./images/bash/sandbox |
	sed -n '/runs each/,/^PASS/p' | sed -e 's/^ *bench_test.go:[0-9]*: //' -e '/^PASS/d'
echo
echo "== tool (images/bash BenchmarkBashTool; init: a binary with sharness-bash's packages)"
CGO_ENABLED=0 go test -run '^$' -bench '^BenchmarkBashTool$' -benchtime "$((RUNS / 4 > 10 ? RUNS / 4 : 10))x" -count 1 ./images/bash |
	sed -n '/calls each/,/^PASS/p' | sed -e 's/^ *bench_test.go:[0-9]*: //' -e '/^PASS/d'
