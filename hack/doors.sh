#!/usr/bin/env bash
# doors.sh: compare the doors (and the agent's checks) of two e2e runs, e.g. one per engine.
#
# Usage: hack/doors.sh diff A B
#
# A and B are files the e2e suite wrote with SHARNESS_E2E_DOORS=FILE (e2e/helpers_test.go,
# recordReport): one JSON line per door or check, with the test's name, the expected and got
# outcome and whether it was ok, and no free-text reason. Each door and check must be in both
# runs with the same expected outcome and the same verdict (ok or not): a door that held on one
# engine and not on the other, or that only one run reports, is printed and fails. Which of a
# door's expected outcomes it got may differ between engines (a dropped packet times out on one
# and is answered unreachable on the other; Engine 29's DNS answers SERVFAIL where 20.10's times
# out): those are printed, as what each engine gives, and fail nothing (docs/engines.md).
set -euo pipefail

usage() {
	echo "usage: $0 diff A B" >&2
	exit 2
}

[ "${1:-}" = diff ] && [ $# -eq 3 ] || usage
a=$2 b=$3
for f in "$a" "$b"; do
	[ -s "$f" ] || {
		echo "doors: $f is missing or empty (was the suite run with SHARNESS_E2E_DOORS=$f?)" >&2
		exit 1
	}
done
# norm FILE: the lines sorted, with what differs between any two runs made alike: the port of
# the host service the suite starts for the host-service doors (a new one each run).
norm() {
	sed -E 's#("door":"host-service/[^"]*):[0-9]+"#\1:<port>"#' "$1" | LC_ALL=C sort
}
# verdicts FILE: norm without the outcome each door got, so that only its verdict is compared.
verdicts() {
	norm "$1" | sed -E 's/,"got":"([^"\\]|\\.)*"//' | LC_ALL=C sort
}
if ! diff -u --label "$a" --label "$b" <(verdicts "$a") <(verdicts "$b"); then
	echo "doors: the two runs' verdicts differ (lines with - are only in $a, + only in $b)" >&2
	exit 1
fi
if ! diff -u --label "$a" --label "$b" <(norm "$a") <(norm "$b") >/tmp/doors-outcomes.$$; then
	echo "doors: the same verdicts; these doors got another of their expected outcomes on each engine:" >&2
	grep -E '^[-+]\{' /tmp/doors-outcomes.$$ | sed -E 's/^(.)\{"test":"([^"]*)","(door|check)":"([^"]*)".*"got":"([^"]*)".*/  \1 \2 \4: \5/' >&2
fi
rm -f /tmp/doors-outcomes.$$
echo "doors: same verdicts on both ($(grep -c '"door"' "$a") doors, $(grep -c '"check"' "$a") checks)" >&2
