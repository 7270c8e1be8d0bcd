package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// change is what a fake fs does with a request: guard's decision, or a blind write.
type change func(op string, req map[string]string) (guard.Result, error)

// fakeFS answers like sharness-fs (status, X-Sharness-Deny, MCP tool errors) around do; the
// real server is tested in images/fs.
func fakeFS(t *testing.T, do change) (api, mcpURL string) {
	mux := http.NewServeMux()
	for _, op := range []string{"write", "delete"} {
		mux.HandleFunc("POST /v1/"+op, func(w http.ResponseWriter, r *http.Request) {
			var req map[string]string
			json.NewDecoder(r.Body).Decode(&req)
			res, err := do(op, req)
			var ref *guard.Refusal
			if errors.As(err, &ref) {
				status := map[guard.Reason]int{guard.ReasonTooLarge: 413}[ref.Reason]
				w.Header().Set("X-Sharness-Deny", string(ref.Reason))
				w.WriteHeader(max(status, 403))
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "exec_bits_stripped": res.ExecBitsStripped})
		})
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake-fs", Version: "1"}, nil)
	type args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "fs_write"}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		_, err := do("write", map[string]string{"path": a.Path, "content": a.Content})
		return nil, nil, err
	})
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL, ts.URL + "/mcp"
}

func workspace(t *testing.T) (ws string) {
	dir := t.TempDir()
	ws, outside := filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
	os.Mkdir(ws, 0o755)
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "passwd"), []byte("root:x:0:0\n"), 0o644)
	protected := []string{".claude/", ".envrc", ".git/hooks/", ".vscode/"}
	if _, err := guard.Prepare(ws, protected); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(ws, ".claude/escape"))
	return ws
}

func TestDoorsAgainstGuard(t *testing.T) {
	ws := workspace(t)
	rules, err := guard.Compile(guard.Policy{Protected: []string{".claude/", ".envrc", ".git/hooks/", ".vscode/"}, Ask: []string{".git/hooks/"}, MaxFileSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	filter, _ := secretfilter.New(nil)
	g, err := guard.Open(ws, rules, filter)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	api, mcpURL := fakeFS(t, func(op string, req map[string]string) (guard.Result, error) {
		if op == "delete" {
			return g.Apply(context.Background(), guard.Change{Op: guard.OpDelete, Path: req["path"]}, nil)
		}
		if req["path"] == "" {
			return guard.Result{}, fmt.Errorf("invalid_field: field path: missing")
		}
		res, err := g.Apply(context.Background(), guard.Change{Op: guard.OpWrite, Path: req["path"], Content: []byte(req["content"]), Mode: req["mode"]}, nil)
		if ref := (*guard.Refusal)(nil); errors.As(err, &ref) && ref.Reason == guard.ReasonApproval {
			// What fs answers for an ask path when it has no operator key (guard.Apply).
			err = &guard.Refusal{Reason: guard.ReasonUnavailable, Message: "no approval gate"}
		}
		return res, err
	})
	p := probe{api: api, mcp: mcpURL, ws: ws, maxFile: 4096}
	for _, r := range sidedoor.TryAll(context.Background(), p.fsDoors(), 1) {
		if !r.OK {
			t.Errorf("door %s: got %q, want %q (%s)", r.Door, r.Got, r.Expected, r.Reason)
		}
	}
}

// TestDoorsCatchABlindWriter: an fs that writes whatever it is asked fails every refusal door.
func TestDoorsCatchABlindWriter(t *testing.T) {
	ws := workspace(t)
	api, mcpURL := fakeFS(t, func(op string, req map[string]string) (guard.Result, error) {
		p := filepath.Join(ws, req["path"])
		if op == "delete" {
			return guard.Result{}, os.RemoveAll(p)
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		return guard.Result{}, os.WriteFile(p, []byte(req["content"]), 0o755)
	})
	p := probe{api: api, mcp: mcpURL, ws: ws, maxFile: 4096}
	for _, r := range sidedoor.TryAll(context.Background(), p.fsDoors(), 1) {
		// The SDK checks the fake's inputs against the schema it infers, so the MCP door still passes.
		wantOK := r.Door == "fs/write-api" || r.Door == "fs/write-mcp" || r.Door == "fs/mcp-invalid-arguments"
		if r.OK != wantOK {
			t.Errorf("door %s: ok %v, want %v (got %q)", r.Door, r.OK, wantOK, r.Got)
		}
		if strings.HasSuffix(r.Expected, ", intact") && !strings.HasSuffix(r.Got, ", changed") {
			t.Errorf("door %s: got %q, want the change seen", r.Door, r.Got)
		}
	}
}

func TestIsURL(t *testing.T) {
	for s, want := range map[string]bool{"http://fs:8091": true, "http://fs:8091/mcp": true, "": false, "fs:8091": false, "ftp://fs": false} {
		if got := isURL(s); got != want {
			t.Errorf("isURL(%q) = %v, want %v", s, got, want)
		}
	}
}
