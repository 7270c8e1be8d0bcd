#!/usr/bin/env bash
# doors.sh: compare the doors (and the agent's checks) of two e2e runs, e.g. one per engine.
#
# Usage: hack/doors.sh diff A B
#
# A and B are files the e2e suite wrote with SHARNESS_E2E_DOORS=FILE (e2e/helpers_test.go,
# recordReport): one JSON line per door or check, with the test's name, the expected and got
# outcome and whether it was ok, and no free-text reason. The two must hold the same lines (in any
# order, the host service's port aside); a door that went another way, or that only one run
# reports, is printed and fails.
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
if diff -u --label "$a" --label "$b" <(norm "$a") <(norm "$b"); then
	echo "doors: identical ($(grep -c '"door"' "$a") doors, $(grep -c '"check"' "$a") checks)" >&2
else
	echo "doors: the two runs differ (lines with - are only in $a, + only in $b)" >&2
	exit 1
fi
