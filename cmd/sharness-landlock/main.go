// Command sharness-landlock is the Landlock helper the runtime shim (cmd/sharness-runtime) binds
// into confined containers: `/.sharness-landlock DOMAIN -- PROGRAM [ARGS...]` puts itself under
// DOMAIN, then executes PROGRAM. What it does and does not guarantee is host/shim/restrict's.
//
// Exit status: none of its own once PROGRAM runs (execve replaced it); 126, with the reason on
// stderr (which `docker logs` shows), when the domain cannot be made or PROGRAM not started.
package main

import (
	"fmt"
	"os"

	"github.com/sharness-ai/sharness/host/shim/restrict"
)

func main() {
	err := restrict.Run(os.Args[1:], os.Stderr)
	fmt.Fprintln(os.Stderr, "sharness-landlock:", err)
	os.Exit(126)
}
