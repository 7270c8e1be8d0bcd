#!/usr/bin/env bash
# conformance.sh: OCI runtime conformance of sharness-runtime in pass-through mode, against runc in
# the same run (issue 6: "non-SHarness containers run correctly through the shim").
#
# Usage: sudo hack/conformance.sh        (needs root: runc creates namespaces, cgroups, mounts)
#
# Two suites, each run once with runc (the peer) and once with a sharness-runtime built from this
# tree, program by program (runc first, then the shim), the two suites side by side:
#   runtime-tools  every validation/* program of opencontainers/runtime-tools (from the Go module
#                  proxy), each a TAP-emitting program that drives the runtime named by $RUNTIME
#                  with create/start/state/kill/delete over its busybox rootfs. None of its
#                  containers carries SHarness's marker, so the shim must behave exactly as runc.
#   runc bats      runc's own tests/integration files (from the module of the runc version on
#                  this host) that cover what runtime-tools does not: exec, update, run, the
#                  global --root/--log/--debug flags, consoles, help. Needs bats, gawk, jq and
#                  script (apt-get install bats gawk jq bsdutils); without them, this suite is
#                  reported as not run.
# Prints a table (pass/fail/skip counts per program under each runtime) and a summary. A program
# in which the shim loses an assertion that runc passes is run again under both; a difference
# that comes back fails the run, one that does not is reported as flaky. runc's own failures on
# this kernel are reported, not hidden: only a difference fails.
#
# Exit codes: 0 no difference; 1 the shim fails an assertion runc passes; 2 could not run (not
# root, strict mode on, a build failed).
#
# Environment:
#   CONFORMANCE_RUNTIME_TOOLS  runtime-tools version; default below (newest pseudo-version that
#                              builds with the Go here; v0.9.0, the last tag, is from 2019)
#   CONFORMANCE_PROGRAMS       runtime-tools programs to run (space-separated); default all
#   CONFORMANCE_BATS           runc .bats files to run (names without .bats), "all", or "none"
#   CONFORMANCE_TIMEOUT        seconds per runtime-tools program (default 60)
#   CONFORMANCE_BATS_TIMEOUT   seconds per .bats file (default 240)
#   CONFORMANCE_OUT            a directory to keep every TAP and stderr file and the table in
#
# It refuses to run while /etc/sharness-ai/strict exists (the shim would then refuse every
# unmarked container) and does not remove it. It leaves nothing behind: containers it created
# (runc's default root, those with a bundle in its work directory; the bats roots), processes
# naming its work directory, mounts under it, the directory itself.
# shellcheck disable=SC2317 # functions called through the traps and through lane
set -euo pipefail
START=$(date +%s)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RT_VERSION=${CONFORMANCE_RUNTIME_TOOLS:-v0.9.1-0.20260316125833-8a4db579f5c8}
PROGRAMS=${CONFORMANCE_PROGRAMS:-}
BATS_DEFAULT="exec update run start_hello start_detached create debug tty root no_pivot delete kill state list pause ps help version cwd userns"
BATS_FILES=${CONFORMANCE_BATS:-$BATS_DEFAULT}
PROG_TIMEOUT=${CONFORMANCE_TIMEOUT:-60}
BATS_TIMEOUT=${CONFORMANCE_BATS_TIMEOUT:-240}
OUT=${CONFORMANCE_OUT:-}
STRICT_FILE=/etc/sharness-ai/strict

log() { printf 'conformance: [%3ds] %s\n' "$(($(date +%s) - START))" "$*" >&2; }
die() { log "$*"; exit 2; }

[ "$(id -u)" -eq 0 ] || die "needs root (runc creates namespaces, cgroups and mounts): sudo $0"
[ ! -e "$STRICT_FILE" ] || die "$STRICT_FILE exists: the shim would refuse every unmarked container; move it away for this run (this script does not touch it)"
command -v go >/dev/null 2>&1 || export PATH=/usr/local/go/bin:$PATH
for t in go tar timeout jq; do command -v "$t" >/dev/null || die "needs $t"; done
RUNC=$(command -v runc) || die "needs runc on PATH"
RUNC=$(readlink -f "$RUNC")
export GOTOOLCHAIN=local SHARNESS_RUNTIME_RUNC=$RUNC
ARCH=$(go env GOARCH)

WORK=$(mktemp -d /tmp/sharness-conformance.XXXXXX)
chmod 0711 "$WORK" # user-namespaced containers (linux_uid_mappings, userns.bats) must reach their bundles
RES=$WORK/res
mkdir -p "$RES/rt" "$RES/bats" "$WORK/rt-run" "$WORK/rt-tmp" "$WORK/bats-tmp"

# sweep_rt: delete the containers runtime-tools left in runc's default root (bundle under $WORK).
sweep_rt() {
	local id
	for id in $("$RUNC" list -f json 2>/dev/null | jq -r --arg w "$WORK/" '.[]? | select(.bundle | startswith($w)) | .id'); do
		"$RUNC" delete -f "$id" >/dev/null 2>&1 || true
	done
}

# sweep_bats: delete the containers left in the bats roots (each test has its own --root).
sweep_bats() {
	local d id
	for d in "$WORK"/bats-tmp/bats-run-*/runc.*/state; do
		[ -d "$d" ] || continue
		for id in $("$RUNC" --root "$d" list -q 2>/dev/null); do
			"$RUNC" --root "$d" delete -f "$id" >/dev/null 2>&1 || true
		done
	done
}

LANES=()
BATS_DIR=""
cleanup() {
	local rc=$? p m
	trap - EXIT
	for p in "${LANES[@]}"; do kill "$p" 2>/dev/null || true; done # interrupted: stop the lanes first
	# What a timeout or an interruption left running (a program, recvtty, a foreground runc run):
	# by pid, only processes whose command line names this run's work directory.
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" != "$$" ] || continue
		if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$WORK/"; then kill -9 "${p#/proc/}" 2>/dev/null || true; fi
	done
	sweep_rt
	sweep_bats
	# Cgroup parents runc does not remove once empty: runtime-tools' relative cgroupsPath
	# (testdir/cgrouptest/container) and runc update.bats' (the cgroup v2 half on a hybrid host).
	for m in /sys/fs/cgroup/testdir /sys/fs/cgroup/*/testdir /sys/fs/cgroup/runc-cgroups-integration-test \
		/sys/fs/cgroup/unified/runc-cgroups-integration-test; do
		if [ -d "$m" ]; then find "$m" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
	done
	# A container sharing the host's mount namespace (linux_ns_itype) leaves its mounts there.
	awk '{print $5}' /proc/self/mountinfo | grep "^$WORK/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done || true
	if [ -n "$OUT" ] && [ -d "$RES" ]; then mkdir -p "$OUT" && cp -r "$RES/." "$OUT/"; fi
	rm -rf --one-file-system "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# module PATH@VERSION: download a module from the proxy; print its directory.
module() {
	local j
	j=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "$1" 2>/dev/null) || true
	jq -r 'select(.Error == null) | .Dir // empty' <<<"$j"
}

# busybox_rootfs OUT: a rootfs tarball from Debian's busybox-static, for a module without one.
busybox_rootfs() {
	local r=$WORK/bb-rootfs a
	ldd /bin/busybox >/dev/null 2>&1 && die "/bin/busybox is not static: apt-get install busybox-static"
	mkdir -p "$r/bin" "$r/etc" "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/root"
	cp /bin/busybox "$r/bin/busybox"
	for a in $(/bin/busybox --list); do [ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"; done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
	printf 'root:x:0:\ntty:x:5:\nnogroup:x:65534:\n' >"$r/etc/group"
	tar -czf "$1" -C "$r" .
}

# --- build ---------------------------------------------------------------------------------------
log "runtime-tools $RT_VERSION from the module proxy"
src=$(module "github.com/opencontainers/runtime-tools@$RT_VERSION")
[ -n "$src" ] || die "cannot download github.com/opencontainers/runtime-tools@$RT_VERSION"
cp -r "$src" "$WORK/runtime-tools" && chmod -R u+w "$WORK/runtime-tools"
rm -rf "$WORK/runtime-tools/vendor" # a module zip keeps vendor/modules.txt only
(
	cd "$WORK/runtime-tools"
	export CGO_ENABLED=0 GOFLAGS='-mod=mod -buildvcs=false'
	go build -tags 'netgo osusergo' -o "$WORK/rt-bin/" ./validation/...
	go build -tags 'netgo osusergo' -o "$WORK/rt-run/runtimetest" ./cmd/runtimetest
) >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; die "runtime-tools does not build"; }
if [ -f "$WORK/runtime-tools/rootfs-$ARCH.tar.gz" ]; then
	cp "$WORK/runtime-tools/rootfs-$ARCH.tar.gz" "$WORK/rt-run/"
else
	log "the module has no rootfs-$ARCH.tar.gz: building one from /bin/busybox (busybox-static)"
	busybox_rootfs "$WORK/rt-run/rootfs-$ARCH.tar.gz"
fi
[ -n "$PROGRAMS" ] || PROGRAMS=$(cd "$WORK/rt-bin" && ls)

log "sharness-runtime from $ROOT"
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$WORK/sharness-runtime" ./cmd/sharness-runtime) ||
	die "cmd/sharness-runtime does not build"
# The policy check the shim hands every command but its pass-throughs to: this tree's, not an
# installed one.
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$WORK/sharness-runtime-check" ./cmd/sharness-runtime/check) ||
	die "cmd/sharness-runtime/check does not build"
export SHARNESS_RUNTIME_CHECK=$WORK/sharness-runtime-check
SHIM=$WORK/sharness-runtime

RUNC_VERSION=$("$RUNC" --version | awk 'NR == 1 {print $3}')
BATS_NOTE=""
prepare_bats() {
	local t v src d
	[ "$BATS_FILES" != none ] || { BATS_NOTE="not run (CONFORMANCE_BATS=none)"; return; }
	for t in bats gawk jq script; do
		command -v "$t" >/dev/null || { BATS_NOTE="not run: needs $t (apt-get install bats gawk jq bsdutils)"; return; }
	done
	v=v${RUNC_VERSION%%[+~]*} # Debian's 1.1.5+ds1 is upstream v1.1.5
	src=$(module "github.com/opencontainers/runc@$v")
	[ -n "$src" ] || { BATS_NOTE="not run: github.com/opencontainers/runc@$v is not on the module proxy"; return; }
	cp -r "$src" "$WORK/runc" && chmod -R u+w "$WORK/runc" && rm -rf "$WORK/runc/vendor"
	BATS_DIR=$WORK/runc/tests/integration
	chmod +x "$BATS_DIR"/*.sh # module zips do not keep modes
	for d in "$WORK"/runc/contrib/cmd/*/; do # recvtty and friends; a cgo one (seccompagent) may fail
		(cd "$WORK/runc" && CGO_ENABLED=0 GOFLAGS='-mod=mod -buildvcs=false' \
			go build -o "$d$(basename "$d")" "./contrib/cmd/$(basename "$d")") >>"$WORK/build.log" 2>&1 || true
	done
	# The busybox image get-images.sh would download: runtime-tools' rootfs plus the directories
	# docker-library's busybox has. No Debian image: the files that need it are not in the default set.
	mkdir -p "$WORK/img"
	tar -xzf "$WORK/rt-run/rootfs-$ARCH.tar.gz" -C "$WORK/img"
	mkdir -p "$WORK"/img/{root,tmp,home,var,run,mnt} && chmod 1777 "$WORK/img/tmp"
	tar -cJf "$BATS_DIR/testdata/busybox-$ARCH.tar.xz" -C "$WORK/img" .
	: >"$BATS_DIR/testdata/debian-$ARCH.tar.xz"
	[ "$BATS_FILES" != all ] || BATS_FILES=$(find "$BATS_DIR" -maxdepth 1 -name '*.bats' -printf '%f\n' | sed 's/\.bats$//' | sort)
	BATS_NOTE="runc $v tests/integration"
}
prepare_bats

# --- run -----------------------------------------------------------------------------------------
# run_rt PROG RT OUT: one runtime-tools program under RT ("runc" or "shim"); OUT.{tap,err,rc}.
run_rt() {
	local rt=$RUNC rc=0
	[ "$2" = runc ] || rt=$SHIM
	(cd "$WORK/rt-run" && TMPDIR=$WORK/rt-tmp RUNTIME=$rt timeout -k 5 "$PROG_TIMEOUT" "$WORK/rt-bin/$1" \
		>"$3.tap" 2>"$3.err" </dev/null) || rc=$?
	echo "$rc" >"$3.rc"
	sweep_rt
}

# run_bats FILE RT OUT [FILTER]: one runc .bats file under RT (its tests matching FILTER), in a
# pseudo-terminal (runc run's tests need a controlling terminal, as on runc's CI).
run_bats() {
	local rt=$RUNC rc=0 cmd
	[ "$2" = runc ] || rt=$SHIM
	cmd=$(printf 'cd %q && RUNC=%q TMPDIR=%q bats --tap --filter %q %q >%q 2>&1' \
		"$BATS_DIR" "$rt" "$WORK/bats-tmp" "${4:-.}" "$1.bats" "$3.tap")
	SHELL=/bin/bash timeout -k 10 "$BATS_TIMEOUT" script -qec "$cmd" /dev/null </dev/null >/dev/null 2>&1 || rc=$?
	: >"$3.err"
	echo "$rc" >"$3.rc"
	sweep_bats
}

lane() { # SUITE RUNNER UNITS...
	local suite=$1 runner=$2 n=0 total u
	shift 2
	total=$#
	for u in "$@"; do
		n=$((n + 1))
		log "$suite $n/$total $u"
		"$runner" "$u" runc "$RES/$suite/$u.runc"
		"$runner" "$u" shim "$RES/$suite/$u.shim"
	done
}

log "running (runtime-tools: $(wc -w <<<"$PROGRAMS") programs; runc bats: ${BATS_NOTE})"
# shellcheck disable=SC2086 # word lists
lane rt run_rt $PROGRAMS &
LANES+=($!)
if [ -n "$BATS_DIR" ]; then
	# shellcheck disable=SC2086
	lane bats run_bats $BATS_FILES &
	LANES+=($!)
fi
for p in "${LANES[@]}"; do wait "$p" || die "a suite stopped early (see above)"; done
LANES=()

# --- compare -------------------------------------------------------------------------------------
# results SUITE RUN: one line per result of RUN (RUN.tap, RUN.rc): "P", "F" or "S" (pass, fail,
# skip) and its description, numbers blanked (temporary paths, ids, random limits). A
# runtime-tools program that makes no TAP assertion (the lifecycle and hook programs report only
# an "error" diagnostic) passes or fails as a whole; its exit status is one more result (util.Fatal:
# it could not set up, or its final check failed). A bats file's status only repeats its tests'.
results() {
	awk -v suite="$1" -v rc="$(cat "$2.rc")" '
		/^ok / { d = $0; sub(/^ok [0-9]+ ?(- )?/, "", d); print (tolower(d) ~ /# skip/ ? "S" : "P"), d; n++ }
		/^not ok / { d = $0; sub(/^not ok [0-9]+ ?(- )?/, "", d); print "F", d; n++ }
		/^ +"error": "/ && !n && err == "" { err = $0; sub(/^ +"error": "/, "", err); sub(/\\n.*/, "", err); sub(/",?$/, "", err) }
		END {
			if (suite == "rt" && !n && err != "") print "F program: " err
			else if (suite == "rt" && !n && rc == 0) print "P program: no error reported"
			if (rc == 124 || rc == 137) print "F program timed out"
			else if (suite == "rt") print (rc == 0 ? "P" : "F"), "program exited " rc
		}' "$2.tap" | sed -E 's/[0-9]+/N/g' | sort
}
# counts SUITE RUN: pass/fail/skip of RUN; a clean exit is not counted as a pass.
counts() { results "$1" "$2" | awk '$0 != "P program exited N" {c[$1]++} END {printf "%d/%d/%d", c["P"], c["F"], c["S"]}'; }
passes() { results "$1" "$2" | sed -n 's/^P //p'; }
# lost SUITE A B: what run A (runc) passed and run B (the shim) did not; gained: the reverse.
lost() { comm -23 <(passes "$1" "$2") <(passes "$1" "$3"); }
gained() { comm -13 <(passes "$1" "$2") <(passes "$1" "$3"); }
# filter: a bats --filter for the tests lost lists (the numbers it blanked match any number).
filter() {
	# shellcheck disable=SC2016 # a sed program, not a shell expansion
	sed -E 's/[][\.*^$(){}+?|/]/\\&/g; s/N/([0-9]+|N)/g; s/.*/^&$/' | paste -sd '|'
}

# Differences the shim keeps on purpose (docs/conformance.md says why each one): a lost result
# listed here is reported as "deliberate", not as a failure.
DELIBERATE=(
	# host/shim.LoadSpec refuses keys that differ only in case (cpu and CPU): a spec that reads
	# two ways is refused rather than guessed at; no engine writes one.
	"update cpuset parameters via resources.CPU"
)
# unexplained SUITE A B: what lost lists, less the deliberate differences.
unexplained() { lost "$@" | grep -vxF -f <(printf '%s\n' "${DELIBERATE[@]}") || true; }

status=0
table=$RES/table.txt
details=$RES/differences.txt
: >"$details"
declare -A tot
printf '%-14s %-32s %-12s %-4s %-12s %-4s %s\n' suite program "runc p/f/s" rc "shim p/f/s" rc verdict >"$table"
compare() { # SUITE RUNNER UNIT
	local s=$1 runner=$2 u=$3 b=$RES/$1/$3 verdict=same rt p f k only=""
	if [ -n "$(lost "$s" "$b.runc" "$b.shim")" ]; then
		# Again under both: a whole runtime-tools program (seconds), only the lost runc tests.
		[ "$s" = rt ] || only=$(lost "$s" "$b.runc" "$b.shim" | filter)
		log "$s $u: the shim lost results runc passed; running them again under both"
		"$runner" "$u" runc "$b.runc.rerun" "$only"
		"$runner" "$u" shim "$b.shim.rerun" "$only"
		if [ -n "$(unexplained "$s" "$b.runc.rerun" "$b.shim.rerun")" ]; then
			verdict=DIFFERS status=1
		elif [ -n "$(lost "$s" "$b.runc.rerun" "$b.shim.rerun")" ]; then
			verdict=deliberate
		else
			verdict=flaky
		fi
		{
			printf '== %s %s: %s; passed under runc, not under the shim (first run):\n' "$s" "$u" "$verdict"
			lost "$s" "$b.runc" "$b.shim" | sed 's/^/   /'
			awk '/^not ok /{p = 1; n = 0} /^ok /{p = 0} p && n++ < 12' "$b.shim.tap" | cut -c1-240 | sed 's/^/   shim: /'
			head -c 1500 "$b.shim.err" | sed 's/^/   shim stderr: /'
		} >>"$details"
	elif [ -n "$(gained "$s" "$b.runc" "$b.shim")" ]; then
		verdict="more"
	fi
	for rt in runc shim; do
		IFS=/ read -r p f k <<<"$(counts "$s" "$b.$rt")"
		tot[$s.$rt.p]=$((${tot[$s.$rt.p]:-0} + p)) tot[$s.$rt.f]=$((${tot[$s.$rt.f]:-0} + f)) tot[$s.$rt.s]=$((${tot[$s.$rt.s]:-0} + k))
	done
	tot[$s.$verdict]=$((${tot[$s.$verdict]:-0} + 1))
	printf '%-14s %-32s %-12s %-4s %-12s %-4s %s\n' "$([ "$s" = rt ] && echo runtime-tools || echo "runc bats")" "$u" \
		"$(counts "$s" "$b.runc")" "$(cat "$b.runc.rc")" "$(counts "$s" "$b.shim")" "$(cat "$b.shim.rc")" \
		"$(sed 's/^flaky$/flaky (same on rerun)/; s/^more$/shim passes more/' <<<"$verdict")" >>"$table"
}
for u in $PROGRAMS; do compare rt run_rt "$u"; done
if [ -n "$BATS_DIR" ]; then for u in $BATS_FILES; do compare bats run_bats "$u"; done; fi

cat "$table"
echo
printf 'runtime-tools %s (%d programs), runc %s (%s), sharness-runtime from %s\n' \
	"$RT_VERSION" "$(wc -w <<<"$PROGRAMS")" "$RUNC_VERSION" "$RUNC" "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo this tree)"
printf 'kernel %s, cgroup %s; runc bats: %s\n' "$(uname -r)" \
	"$([ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && echo v2 || echo v1)" "$BATS_NOTE"
for s in rt bats; do
	[ "$s" = rt ] || [ -n "$BATS_DIR" ] || continue
	for rc in runc shim; do
		printf '  %-13s %-5s pass %4d  fail %3d  skip %3d\n' \
			"$([ "$s" = rt ] && echo runtime-tools || echo "runc bats")" "$rc" \
			"${tot[$s.$rc.p]:-0}" "${tot[$s.$rc.f]:-0}" "${tot[$s.$rc.s]:-0}"
	done
	printf '  %-13s same %d, differs %d, deliberate %d, flaky %d, shim passes more %d\n' "" \
		"${tot[$s.same]:-0}" "${tot[$s.DIFFERS]:-0}" "${tot[$s.deliberate]:-0}" "${tot[$s.flaky]:-0}" "${tot[$s.more]:-0}"
done
if [ -s "$details" ]; then
	echo
	cat "$details"
fi
[ ! -e "$STRICT_FILE" ] || { log "$STRICT_FILE appeared during the run: differences may be strict mode's"; status=1; }
echo
printf 'wall time %ds; %s\n' "$(($(date +%s) - START))" \
	"$([ "$status" = 0 ] && echo "no difference: the shim passes everything runc passes" || echo "DIFFERENCES: the shim fails what runc passes")"
exit "$status"
