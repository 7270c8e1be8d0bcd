package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/fs/guard"
)

// tools are the MCP face of the JSON API: the same inputs, read by the same strict decoder (so
// the low-level AddTool, which leaves the raw arguments to the handler), the same decisions.
var tools = []struct{ op, description, schema string }{
	{"write", "Write a file under a protected workspace path (.claude/, .vscode/, ...), which the agent cannot write directly. Give content (UTF-8) or content_base64, and optionally mode as an octal string such as \"0644\" (exec bits are stripped unless the policy allows them).",
		`{"type":"object","properties":{"path":{"type":"string","description":"path relative to the workspace, e.g. .claude/commands/hello.md"},"content":{"type":"string"},"content_base64":{"type":"string"},"mode":{"type":"string","pattern":"^0?[0-7]{3}$"}},"required":["path"],"additionalProperties":false}`},
	{"delete", "Delete a file or an empty folder inside a protected workspace folder (never a protected path itself).",
		`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`},
	{"rename", "Rename an entry inside a protected workspace folder to a new name inside one; never replaces an existing entry.",
		`{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"}},"required":["from","to"],"additionalProperties":false}`},
}

func (s *server) mcpServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sharness-fs", Version: "1"}, &mcp.ServerOptions{
		Instructions: "The workspace's protected paths are read-only for you; change them with these tools. A change to a path that needs a person's approval (git hooks, shell startup files, ...) waits for their decision, up to a few minutes. Refusals name their reason."})
	for _, t := range tools {
		srv.AddTool(&mcp.Tool{Name: "fs_" + t.op, Description: t.description, InputSchema: json.RawMessage(t.schema)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				o, bad := decode(t.op, req.Params.Arguments)
				if bad != nil {
					s.record("mcp", guard.Change{Op: t.op}, "deny", string(bad.reason), guard.Result{}, nil)
					return toolError(bad.reason, bad.message), nil
				}
				res, err := s.do(ctx, "mcp", o) // a change to an ask path waits here for the operator
				var ref *guard.Refusal
				switch {
				case errors.As(err, &ref):
					return toolError(ref.Reason, ref.Message), nil
				case err != nil:
					return toolError(guard.ReasonIO, ""), nil
				}
				b, _ := json.Marshal(answerOf(res))
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
			})
	}
	return srv
}

// toolError is a refusal as a tool result: the model reads it and can correct itself. The text
// starts with the reason code; message "" is the reason's own text.
func toolError(reason guard.Reason, message string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(reason) + ": " + cmp.Or(message, reason.Text())}}}
}

// mcpHandler serves the tools. SessionTimeout ends idle sessions only: the SDK pauses it while a
// request is open, such as a tool call waiting for the operator.
func (s *server) mcpHandler() http.Handler {
	srv := s.mcpServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: s.maxBody, SessionTimeout: 30 * time.Minute})
}
