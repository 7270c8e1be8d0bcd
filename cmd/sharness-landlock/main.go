// Command sharness-landlock is the Landlock helper the runtime shim (cmd/sharness-runtime) binds
// into confined containers: `/.sharness-landlock DOMAIN... -- PROGRAM [ARGS...]` puts itself
// under the domain, then executes PROGRAM. What it does and does not guarantee, and how the
// domain is written, is host/shim/restrict's.
//
// Exit status: none of its own once PROGRAM runs (execve replaced it); 126, with the reason on
// stderr (which `docker logs` shows), when the domain cannot be made or PROGRAM not started.
package main

import (
	"os"

	"github.com/sharness-ai/sharness/host/shim/restrict"
)

func main() {
	err := restrict.Run(os.Args[1:], func(s string) { os.Stderr.WriteString(s) })
	if err == restrict.ErrHealthy {
		os.Exit(0)
	}
	os.Stderr.WriteString("sharness-landlock: " + err.Error() + "\n")
	os.Exit(126)
}
