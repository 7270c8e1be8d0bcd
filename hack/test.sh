#!/usr/bin/env bash
# test.sh: every test. The unit gate (hack/check.sh: gofmt, vet, staticcheck, go test -race), the
# end-to-end suite on a real Docker engine (hack/e2e.sh, which also installs Debian's chromium),
# and the dashboard's browser test in that chromium. .ci/run calls exactly this.
set -euo pipefail
# Build with the Go release go.mod's toolchain line names (its security fixes are in what we
# ship); a GOTOOLCHAIN the caller sets wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/hack/check.sh"
"$ROOT/hack/e2e.sh"
(cd "$ROOT" && go test -tags browser -count=1 ./host/dashboard/)
