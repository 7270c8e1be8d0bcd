// Package benchprofile, once imported, writes CPU profiles of the whole process, one per 10 s,
// to /tmp/sharness-<name>-<pid>.<n>.prof (each file complete on its own, since the process may
// be stopped at any moment; `go tool pprof -top FILES...` merges them). It is for diagnostic
// builds only: a binary imports it under a build tag (images/net: `-tags netprofile`, which
// hack/bench-net.sh sets with BENCH_NET_PROFILE=1), never in the shipped build.
package benchprofile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"
)

func init() {
	name := filepath.Base(os.Args[0])
	go func() {
		for n := 0; n < 60; n++ {
			f, err := os.Create(fmt.Sprintf("/tmp/%s-%d.%d.prof", name, os.Getpid(), n))
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchprofile:", err)
				return
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintln(os.Stderr, "benchprofile:", err)
				f.Close()
				return
			}
			time.Sleep(10 * time.Second)
			pprof.StopCPUProfile()
			f.Close()
		}
	}()
}
