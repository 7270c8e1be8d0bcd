package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolChecks uses the shell and the files as an agent would, when compose gave it bash
// ($SHARNESS_AI_BASH_MCP) and fs ($SHARNESS_AI_FS_URL): one command in a sandbox through the MCP
// tool, and one write to a protected path through fs, read back through the read-only mount.
func toolChecks(ctx context.Context, getenv func(string) string) []result {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	shell, files := getenv("SHARNESS_AI_BASH_MCP"), getenv("SHARNESS_AI_FS_URL")
	if shell == "" || files == "" {
		return []result{skip("tools", "bash and fs", "SHARNESS_AI_BASH_MCP or SHARNESS_AI_FS_URL is not set: no bash or fs in this stack")}
	}
	return []result{shellCheck(ctx, shell), fsWriteCheck(ctx, files)}
}

// shellCheck runs one command in a fresh analyse sandbox: it must run as the sandbox's own
// non-root user and see only its own few processes (its init, bash, the counting commands).
func shellCheck(ctx context.Context, url string) result {
	const check, want = "shell-mcp", "uid 1000, the sandbox's own few processes"
	var got struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sharness-agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err == nil {
		defer cs.Close()
		var res *mcp.CallToolResult
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": `echo "uid $(id -u), $(ls /proc | grep -c '^[0-9]') processes"`, "profile": "analyse"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		} else if err == nil {
			b, _ := json.Marshal(res.StructuredContent)
			err = json.Unmarshal(b, &got)
		}
	}
	if err != nil {
		return judge(check, want, "failed", false, err.Error())
	}
	var uid, n int
	_, serr := fmt.Sscanf(got.Stdout, "uid %d, %d processes", &uid, &n)
	return judge(check, want, strings.TrimSpace(got.Stdout), got.ExitCode == 0 && serr == nil && uid == 1000 && n <= 6,
		"each command runs in a fresh sandbox: its own user and process table")
}

// fsWriteCheck writes a protected path through fs and reads it back through the agent's own
// read-only mount of it.
func fsWriteCheck(ctx context.Context, base string) result {
	const check, want, path = "fs-write", "written by fs, read back", ".claude/commands/sharness-demo.md"
	content := "Written through fs by the demo agent at " + time.Now().UTC().Format(time.RFC3339Nano) + "\n"
	body, _ := json.Marshal(map[string]string{"path": path, "content": content})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+"/v1/write", bytes.NewReader(body))
	if err != nil {
		return judge(check, want, "no request", false, err.Error())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return judge(check, want, "no answer", false, err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return judge(check, want, resp.Status, false, strings.TrimSpace(string(answer)))
	}
	read, err := os.ReadFile("/workspace/" + path)
	return judge(check, want, fmt.Sprintf("%s, read back %d bytes", resp.Status, len(read)), err == nil && string(read) == content,
		"fs is the one writer of protected paths, under its content rules")
}
