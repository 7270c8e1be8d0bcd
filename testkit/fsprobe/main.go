// Command sharness-fsprobe tries the fs component's doors from the agent's seat and prints one
// JSON line per attempt in the side-door suite's format (testkit/sidedoor), then a summary.
//
//	SHARNESS_AI_FS_URL=http://fs:8091 SHARNESS_AI_FS_MCP=http://fs:8091/mcp sharness-fsprobe [-workspace /workspace]
//
// The doors run in order, one at a time: writes to protected paths through fs's JSON API and its
// MCP tools must work and show through the agent's own read-only mount; every refused write
// (a private key, a symlink escape, "..", an oversized file, an ask path, a path fs does not
// guard, deleting a protected folder) must leave what the agent sees exactly as it was; the agent's
// own writes to protected paths and its rename of .git must fail. The e2e suite plants the symlink
// .claude/escape -> /etc in the workspace before the stack starts. It writes
// .claude/commands/hello.md and .vscode/settings.json.
//
// It proves only what it tries, from where it runs.
//
// Exit codes: 0 every door ok, 1 a door failed, 2 usage or configuration error.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

func main() {
	workspace := flag.String("workspace", cmp.Or(os.Getenv("SHARNESS_AI_FSPROBE_WORKSPACE"), "/workspace"), "the workspace as the agent mounts it (env SHARNESS_AI_FSPROBE_WORKSPACE)")
	maxFile := flag.Int64("max-file-size", 1<<20, "fs's business.fs.max_file_size in bytes; the oversized door sends one byte more")
	flag.Parse()
	api, mcpURL := os.Getenv("SHARNESS_AI_FS_URL"), os.Getenv("SHARNESS_AI_FS_MCP")
	if flag.NArg() > 0 || !isURL(api) || !isURL(mcpURL) || *maxFile < 1 {
		fmt.Fprintln(os.Stderr, "usage: SHARNESS_AI_FS_URL=http://fs:8091 SHARNESS_AI_FS_MCP=http://fs:8091/mcp sharness-fsprobe [-workspace /workspace] [-max-file-size bytes]")
		os.Exit(2)
	}
	p := probe{api: api, mcp: mcpURL, ws: *workspace, maxFile: *maxFile}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	sum, err := sidedoor.Report(ctx, os.Stdout, sidedoor.Group{Doors: append(p.fsDoors(), p.directDoors()...), Par: 1})
	cancel()
	if err != nil || sum.Failed > 0 {
		os.Exit(1)
	}
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
