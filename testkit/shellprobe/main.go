// Command sharness-shellprobe tries bash's side doors from the agent's seat, through a real MCP
// client of the bash tool ($SHARNESS_AI_BASH_MCP, http://bash:8090/mcp in the stack), and prints
// one JSON line per attempt in the side-door suite's format (testkit/sidedoor), then a summary.
// Each door runs one or more commands in bash's sandboxes and names what came back: a refusal
// for the expected reason (EROFS, EACCES, EPERM, a timeout, a redaction...) passes it; a
// success, or a failure of another kind, fails it.
//
// It proves only what it tries, from where it runs: bash's answers to these commands, under the
// policy and kernel of the stack it reaches. The heavy doors (a fork bomb, a runaway, 100 MB of
// output) run last, one at a time; they load bash's container while they run.
//
// It expects the default policy (analyse, build and admin allowed, an edge to net, no operator
// key: admin is refused with approval_unavailable) and the workspace that `sharness-ai
// workspace init` prepares (.git/hooks and .claude mounted read-only). It writes and removes
// .shellprobe-* files at the workspace's root.
//
// `sharness-shellprobe call '<arguments>'` makes one call of the bash tool with the JSON
// arguments instead, waits as long as bash does (an admin command waits for the operator, the
// e2e suite's TestAdminGate), and prints one JSON line: {"refusal", "exit_code", "stdout",
// "stderr"}; exit 0 for a result, 1 for a tool error.
//
// Environment:
//
//	SHARNESS_AI_BASH_MCP  the bash tool's MCP endpoint
//
// Exit codes: 0 every door ok, 1 a door failed, 2 usage or configuration error.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// budget bounds the whole run.
const budget = 5 * time.Minute

func main() {
	endpoint := os.Getenv("SHARNESS_AI_BASH_MCP")
	oneCall := len(os.Args) == 3 && os.Args[1] == "call"
	if len(os.Args) > 1 && !oneCall || endpoint == "" {
		fail("usage: SHARNESS_AI_BASH_MCP=http://bash:8090/mcp sharness-shellprobe [call '<JSON arguments>']")
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
	if oneCall {
		os.Exit(sh.once(ctx, os.Args[2]))
	}
	sum, err := sidedoor.Report(ctx, os.Stdout,
		sidedoor.Group{Doors: sh.doors(), Par: 4},
		sidedoor.Group{Doors: sh.heavyDoors(), Par: 1})
	if err != nil || sum.Failed > 0 {
		os.Exit(1)
	}
}

// once makes the one call of `call` and prints what came back.
func (s shell) once(ctx context.Context, arguments string) int {
	var args map[string]any
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		fail("call: the arguments are not a JSON object: %v", err)
	}
	o, refusal, err := s.call(ctx, args)
	if err != nil {
		fail("call: %v", err)
	}
	line, _ := json.Marshal(map[string]any{"refusal": refusal, "exit_code": o.ExitCode, "stdout": o.Stdout, "stderr": o.Stderr})
	fmt.Println(string(line))
	if refusal != "" {
		return 1
	}
	return 0
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sharness-shellprobe: "+format+"\n", args...)
	os.Exit(2)
}
