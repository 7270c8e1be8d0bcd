// Command sharness-shellprobe tries bash's side doors from the agent's seat, through a real MCP
// client of the bash tool ($SHARNESS_AI_BASH_MCP, http://bash:8090/mcp in the stack), and prints
// one JSON line per attempt in the side-door suite's format (internal/sidedoor), then a summary.
// Each door runs one or more commands in bash's sandboxes and names what came back: a refusal
// for the expected reason (EROFS, EACCES, EPERM, a timeout, a redaction...) passes it; a
// success, or a failure of another kind, fails it.
//
// It proves only what it tries, from where it runs: bash's answers to these commands, under the
// policy and kernel of the stack it reaches. The heavy doors (a fork bomb, a runaway, 100 MB of
// output) run last, one at a time; they load bash's container while they run.
//
// It expects the default policy (analyse and build allowed, an edge to net) and the workspace
// that `sharness-ai workspace init` prepares (.git/hooks and .claude mounted read-only). It
// writes and removes .shellprobe-* files at the workspace's root.
//
// Environment:
//
//	SHARNESS_AI_BASH_MCP  the bash tool's MCP endpoint
//
// Exit codes: 0 every door ok, 1 a door failed, 2 usage or configuration error.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/internal/sidedoor"
)

// budget bounds the whole run.
const budget = 5 * time.Minute

func main() {
	endpoint := os.Getenv("SHARNESS_AI_BASH_MCP")
	if len(os.Args) > 1 || endpoint == "" {
		fail("usage: SHARNESS_AI_BASH_MCP=http://bash:8090/mcp sharness-shellprobe (no arguments)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	connectCtx, stop := context.WithTimeout(ctx, 15*time.Second)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sharness-shellprobe", Version: "1"}, nil).
		Connect(connectCtx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	stop()
	if err != nil {
		fail("connect to %s: %v", endpoint, err)
	}
	defer cs.Close()
	sh := shell{cs}
	sum, err := sidedoor.Report(ctx, os.Stdout,
		sidedoor.Group{Doors: sh.doors(), Par: 4},
		sidedoor.Group{Doors: sh.heavyDoors(), Par: 1})
	if err != nil || sum.Failed > 0 {
		os.Exit(1)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sharness-shellprobe: "+format+"\n", args...)
	os.Exit(2)
}
