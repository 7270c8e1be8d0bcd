#!/usr/bin/env bash
# up.sh: the main job. Runs the default stack (launcher, net, llm, kms, bash, fs and the demo
# agent) around the offline world of compose/world.yml on a Docker engine, installing and starting
# one if none answers, and stops only what it started. Once kms has made its session identity, the
# script seals a throwaway API key to it, as a person seals a real one (README), and only then
# starts the agent. The agent prints its confinement report, its conversation with the offline
# model through llm (which swaps the placeholder key for the sealed one), a shell command through
# bash's MCP tool and a write through fs, and the side-door probe's table: every door refused, the
# allowed paths (curl, git) working. The workspace is a throwaway folder unless
# SHARNESS_AI_WORKSPACE names yours (it must be writable by uid 65532: the agent, bash and fs run as
# that uid).
#
# Usage: hack/up.sh [--keep]
#        SHARNESS_AI_POLICY_HASH=sha256:... hack/up.sh  (refuse any other policy)
#
#   --keep                    (or SHARNESS_AI_KEEP=1) leave the stack, its throwaway folder and the
#                             engine up at the end, and print the commands to look at it and to stop it
#
# Your own agent, on your project, online with your key, is `sharness-ai run` (docs/cli.md#run).
#
# Output: one line per step on stderr; everything the steps print (go, apt, docker, compose, the
# stack's logs on a failure) goes to a log file, kept after the run, whose path is printed first:
# $XDG_STATE_HOME/sharness-ai/up-<time>.log (default ~/.local/state). A failed step is named, with
# its last 40 lines of the log. The demo agent's JSON report goes to the log and to
# up-<time>.report.jsonl beside it; stdout gets a summary computed from it: the checks passed (and
# which failed), the side doors tried and held (and which did not), whether the model answered
# through llm with the sealed key, and what is left running.
#
# Exit status: the demo's verdict, 0 only if every check passed and every door held, and the agent
# exited 0; non-zero when a step failed.
#
# The stack is the offline world's: policies/world/manifest.yaml (the default policy and the
# test_world section that grants the world's test switches, under its hash), compiled to
# compose/world/, with compose/world.yml over it. Before anything runs, the committed docker-compose.yml and
# compiled/, and compose/world/, must be exactly what the two manifests compile to, and, when
# SHARNESS_AI_POLICY_HASH is given, the hash of the manifest that runs must equal it. Every
# service runs under the runtime shim (sharness-runtime, installed here and registered by
# hack/engine.sh), which refuses any container wider than its compiled policy.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENGINE=$ROOT/hack/engine.sh
cd "$ROOT"

keep=${SHARNESS_AI_KEEP:-}
[ "$keep" != 0 ] || keep=
if [ "${1:-}" = --keep ]; then
	keep=1
	shift
fi
if [ $# -gt 0 ]; then
	echo "usage: hack/up.sh [--keep] (your own agent, online, on your project: go run ./cmd/sharness-ai run, docs/cli.md#run)" >&2
	exit 2
fi
stamp=$(date +%Y%m%d-%H%M%S)
LOGDIR=${XDG_STATE_HOME:-${HOME:-/tmp}/.local/state}/sharness-ai
mkdir -p "$LOGDIR"
LOG=$LOGDIR/up-$stamp.log
REPORT=$LOGDIR/up-$stamp.report.jsonl
: >"$LOG"
printf 'up: log %s\n' "$LOG" >&2
# From here on the steps write to the log; fd 3 and 4 are the person's stdout and stderr.
exec 3>&1 4>&2 >>"$LOG" 2>&1

step= step_start=0 step_line=0 started= engine= stack= work= torn=
# dur SECONDS: 1m52s, or 12s.
dur() {
	if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi
}
# begin NAME / end: one progress line per step on the person's stderr, a header in the log.
begin() {
	step=$1 step_start=$SECONDS step_line=$(wc -l <"$LOG")
	printf 'up: %s… ' "$step" >&4
	printf '\n==> up: %s (%s)\n' "$step" "$(date -u +%FT%TZ)"
}
end() {
	printf 'done (%s)\n' "$(dur $((SECONDS - step_start)))" >&4
	step=
}
say() { printf 'up: %s\n' "$*" >&4; }

# teardown removes the stack and the throwaway folder and stops the engine if this run started
# it, unless --keep; once.
teardown() {
	[ -z "$torn" ] || return 0
	torn=1
	[ -z "$keep" ] || return 0
	if [ -n "$stack" ]; then "${compose[@]}" down --volumes || true; fi
	[ -z "$work" ] || rm -rf "$work"
	if [ -n "$started" ]; then "$ENGINE" stop || true; fi
}

# left_running: one line saying what of this run is still up, and how to stop it.
left_running() {
	local left=() stop=()
	if [ -n "$stack" ] && [ -n "$("${compose[@]}" ps -aq 2>/dev/null)" ]; then
		left+=("the stack (project sharness)")
		stop+=("go run ./cmd/sharness-ai -f $manifest down -p sharness --volumes")
	fi
	if [ -n "$work" ] && [ -d "$work" ]; then
		left+=("its folder $work")
		stop+=("rm -rf $work")
	fi
	if [ -n "$started" ] && docker info >/dev/null 2>&1; then
		left+=("the engine up.sh started")
		stop+=("hack/engine.sh stop")
	fi
	if [ ${#left[@]} -eq 0 ]; then
		case $engine in
		started) echo "Left running: nothing (up.sh stopped the engine it started)." ;;
		found) echo "Left running: nothing (the engine was running before up.sh and stays up)." ;;
		*) echo "Left running: nothing." ;;
		esac
		return
	fi
	echo "Left running: $(printf '%s, ' "${left[@]}" | sed 's/, $//')."
	echo "  stop with: cd $ROOT && $(printf '%s && ' "${stop[@]}" | sed 's/ && $//')"
}

finish() {
	local rc=$?
	trap - EXIT
	if [ -n "$step" ]; then
		[ "$rc" -ne 0 ] || rc=1
		local what=failed
		[ "$rc" -lt 128 ] || what=interrupted
		printf '%s (%s, exit %d)\n' "$what" "$(dur $((SECONDS - step_start)))" "$rc" >&4
		say "step \"$step\" $what; its last 40 lines in the log:"
		tail -n +$((step_line + 1)) "$LOG" | tail -n 40 | sed 's/^/    /' >&4
		if [ -n "$stack" ]; then
			printf '\n==> up: the stack'"'"'s logs\n'
			"${compose[@]}" logs --no-color llm kms bash fs || true
			say "the stack's logs (llm, kms, bash, fs) are in the log too"
		fi
		say "log: $LOG"
		teardown
		left_running >&4
	fi
	exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# summarise: the demo agent's report ($REPORT: one JSON line per check, its summary, one per side
# door, the probe's summary) as a few sentences; returns 0 only if every check passed and every
# door held, as many of each as their summary lines count.
summarise() {
	local line name got exp ok=0
	local re_name='^\{"(check|door)":"(([^"\\]|\\.)*)"' re_got='"got":"(([^"\\]|\\.)*)"'
	local re_exp='"expected":"(([^"\\]|\\.)*)"' re_sum='"passed":([0-9]+),"failed":([0-9]+)(,"skipped":([0-9]+))?'
	local checks=0 cfail=() cskip=0 doors=0 dfail=() allowed=0 sums=() shell= fsw=
	local -A passed=()
	while IFS= read -r line; do
		if [[ $line =~ $re_name ]]; then
			local kind=${BASH_REMATCH[1]}
			name=${BASH_REMATCH[2]}
			got= exp=
			if [[ $line =~ $re_got ]]; then got=${BASH_REMATCH[1]}; fi
			if [[ $line =~ $re_exp ]]; then exp=${BASH_REMATCH[1]}; fi
			if [ "$kind" = check ]; then
				checks=$((checks + 1))
				if [[ $line == *',"skipped":true'* ]]; then
					cskip=$((cskip + 1))
				elif [[ $line == *',"ok":true'* ]]; then
					passed[$name]=1
					case $name in shell-mcp) shell=$got ;; fs-write) fsw=$got ;; esac
				else
					cfail+=("$name (got $got, expected $exp)")
				fi
			else
				doors=$((doors + 1))
				case $name in allowed-*) allowed=$((allowed + 1)) ;; esac
				[[ $line == *',"ok":true'* ]] || dfail+=("$name (got $got, expected $exp)")
			fi
		elif [[ $line =~ ^\{\"summary\": ]] && [[ $line =~ $re_sum ]]; then
			sums+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[4]:-0}")
		fi
	done <"$REPORT"

	local cpass=$((checks - ${#cfail[@]} - cskip))
	if [ ${#cfail[@]} -eq 0 ]; then
		echo "Checks: $cpass of $checks passed$([ "$cskip" -eq 0 ] || echo " ($cskip skipped)")."
	else
		echo "Checks: $cpass of $checks passed; failed: $(printf '%s; ' "${cfail[@]}" | sed 's/; $//')."
	fi
	if [ "${#sums[@]}" -lt 1 ] || [ "${sums[0]}" != "$cpass ${#cfail[@]} $cskip" ]; then
		echo "  the agent's own summary line does not count the same checks: the report is incomplete."
		ok=1
	fi
	[ ${#cfail[@]} -eq 0 ] || ok=1
	if [ -n "${passed[model-tool-call]:-}" ]; then
		printf 'Model: answered through llm with the key sealed to kms (the agent holds only a placeholder; the offline model accepts the sealed key alone)'
		if [ -n "${passed[model-refused]:-}" ]; then printf '; llm refused a model the policy does not allow'; fi
		echo .
	fi
	if [ -n "$shell" ] || [ -n "$fsw" ]; then
		echo "Tools: ${shell:+a command in a bash sandbox ran as $shell}${shell:+${fsw:+; }}${fsw:+fs wrote a protected path ($fsw)}."
	fi
	if [ "$doors" -eq 0 ]; then
		echo "Side doors: none tried (the probe printed no lines)."
		ok=1
	elif [ ${#dfail[@]} -eq 0 ]; then
		echo "Side doors: $doors tried, all held: $((doors - allowed)) refused for the expected reason, the $allowed allowed-path checks (curl, git through net) as expected."
	else
		echo "Side doors: $doors tried, $((doors - ${#dfail[@]})) held; not as expected: $(printf '%s; ' "${dfail[@]}" | sed 's/; $//')."
		ok=1
	fi
	if [ "$doors" -gt 0 ] && { [ "${#sums[@]}" -lt 2 ] || [ "${sums[1]}" != "$((doors - ${#dfail[@]})) ${#dfail[@]} 0" ]; }; then
		echo "  the probe's own summary line does not count the same doors: the report is incomplete."
		ok=1
	fi
	return "$ok"
}

begin "checking the policy"
go run ./cmd/sharness-ai compile --check
go run ./cmd/sharness-ai -f policies/world/manifest.yaml compile -o compose/world --check
manifest=policies/world/manifest.yaml stackdir=compose/world
# Every sharness-ai below reads this manifest.
export SHARNESS_AI_MANIFEST=$manifest
M=$(go run ./cmd/sharness-ai hash)
supplied=
if [ -z "${SHARNESS_AI_POLICY_HASH:-}" ]; then
	# The demo supplies the committed manifest's hash itself; a person pins their own instead.
	echo "up: supplying policy $M (export SHARNESS_AI_POLICY_HASH yourself to refuse any other policy)"
	export SHARNESS_AI_POLICY_HASH=$M
	supplied=1
fi
go run ./cmd/sharness-ai verify --policy-hash "$SHARNESS_AI_POLICY_HASH"
end
if [ -n "$supplied" ]; then
	say "policy $M of $manifest (export SHARNESS_AI_POLICY_HASH to refuse any other)"
else
	say "policy $M of $manifest, as SHARNESS_AI_POLICY_HASH names"
fi

begin "installing the engine and the runtime shim"
"$ENGINE" install
# The runtime shim (every service asks for `runtime: sharness`) before the engine that registers it.
"$ROOT/hack/runtime.sh" install >/dev/null
end
if ! docker info >/dev/null 2>&1; then
	begin "starting the engine"
	started=1 engine=started
	"$ENGINE" start
	end
else
	engine=found
	say "engine: already running, used as it is (and left up)"
fi
begin "checking the engine's runtime"
case $(docker info --format '{{json .Runtimes}}') in
*'"sharness"'*) ;;
*) echo "up: the running engine has no runtime \"sharness\": restart it with hack/engine.sh (or register $(command -v sharness-runtime || echo /usr/local/bin/sharness-runtime) in daemon.json)" >&2; exit 1 ;;
esac
end
begin "building the images"
"$ROOT/hack/build-images.sh"
end
# The compiled policies the shim checks each container against (root-owned, /etc/sharness-ai); for
# the world also its fixtures.json, which lists the world's own containers.
# After the images: install also records each component's code (its entrypoint's SHA-256 in the
# image built here), by which the shim knows a component's container.
begin "installing the compiled policies"
go run ./cmd/sharness-ai install --replace
end

begin "preparing the session"
# The probe also tries the host's own addresses and the edge gateways (port 9: if anything
# answered, even with a refusal, the wall would have a hole there).
addrs=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); printf "%s:9,", a[1]}')
export SHARNESS_PROBE_HOST_ADDRS="${addrs}10.213.0.1:9,10.214.0.1:9"

work=$(mktemp -d)
chmod 0755 "$work"
# A throwaway key stands in for a real one; the offline model accepts this key alone, so the
# demo shows the sealed key, and not the agent's placeholder, is what reached the model.
key="sk-ant-api03-offline-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
SHARNESS_MODEL_EXPECT_KEY_SHA256=$(printf %s "$key" | sha256sum | cut -d' ' -f1)
export SHARNESS_MODEL_EXPECT_KEY_SHA256
# The offline world's throwaway TLS leaf and CA, handed to world, model, llm and the probe.
worldca=$(go run ./testkit/worldca)
eval "$worldca"
unset worldca
export SHARNESS_AI_SECRETS_DIR=$work/secrets
mkdir -m 0755 "$SHARNESS_AI_SECRETS_DIR"

if [ -z "${SHARNESS_AI_WORKSPACE:-}" ]; then
	export SHARNESS_AI_WORKSPACE=$work/workspace
	mkdir "$SHARNESS_AI_WORKSPACE"
	chown 65532:65532 "$SHARNESS_AI_WORKSPACE"
fi
# The protected paths must exist before the agent and bash mount them read-only.
go run ./cmd/sharness-ai workspace init --dir "$SHARNESS_AI_WORKSPACE"

files=(-f "$stackdir/docker-compose.yml" -f compose/world.yml)
services=(launcher net llm kms bash fs world model)
compose=(docker compose "${files[@]}" -p sharness)
stack=1

# The session record the shim holds every component to: this policy, this workspace, these
# secrets (root's, /etc/sharness-ai/sessions/sharness.json).
go run ./cmd/sharness-ai session record -p sharness --dir "$stackdir" >/dev/null
end

begin "starting the stack (${services[*]})"
"${compose[@]}" up --pull never --detach --wait "${services[@]}"
end
begin "sealing the key to kms"
go run ./cmd/sharness-ai kms bundle -p sharness "${files[@]}" --wait 30s --out "$work/bundle.json"
printf %s "$key" | go run ./cmd/sharness-ai secret seal --to "$work/bundle.json" --out "$SHARNESS_AI_SECRETS_DIR" anthropic-api-key
unset key
end

begin "running the demo agent"
"${compose[@]}" up --pull never --detach agent
agent=$("${compose[@]}" ps -aq agent)
status=$(docker wait "$agent")
# Its stdout is the report; its stderr, only the log's.
docker logs "$agent" >"$REPORT"
printf '\n==> up: the agent'"'"'s report (exit %s)\n' "$status"
cat "$REPORT"
end
echo >&3
verdict=0
summarise >&3 || verdict=1
if [ "$status" -ne 0 ]; then
	echo "The agent exited with status $status." >&3
	verdict=$status
fi
echo "Report: $REPORT" >&3
if [ "$verdict" -ne 0 ]; then
	printf '\n==> up: the stack'"'"'s logs\n'
	"${compose[@]}" logs --no-color llm kms bash fs || true
fi

if [ -z "$keep" ]; then
	begin "removing the stack"
	teardown
	end
	left_running >&3
else
	torn=1
	cat >&3 <<MSG
Kept: the stack (project sharness), its workspace $SHARNESS_AI_WORKSPACE and secrets $SHARNESS_AI_SECRETS_DIR.
Try, from $ROOT:
  export SHARNESS_AI_MANIFEST=$manifest SHARNESS_AI_POLICY_HASH=$SHARNESS_AI_POLICY_HASH
  go run ./cmd/sharness-ai status -p sharness
  go run ./cmd/sharness-ai audit verify --project sharness
  go run ./cmd/sharness-ai dashboard --project sharness     (prints the URL to open; Ctrl-C stops it)
  go run ./cmd/sharness-ai down -p sharness --volumes && rm -rf $work$([ -n "$started" ] && printf ' && hack/engine.sh stop')
MSG
fi
if [ "$verdict" -eq 0 ]; then
	echo "Verdict: pass. Log: $LOG" >&3
else
	echo "Verdict: FAIL (exit $verdict). Log: $LOG" >&3
fi
exit "$verdict"
