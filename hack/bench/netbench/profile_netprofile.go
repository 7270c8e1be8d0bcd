//go:build netprofile

package main

// With BENCH_NET_PROFILE=1 (hack/bench-net.sh) every netbench process writes CPU profiles too
// (testkit/benchprofile), so the stdlib proxy can be compared with net function by function.
import _ "github.com/sharness-ai/sharness/testkit/benchprofile"
