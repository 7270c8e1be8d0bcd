package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/internal/secretfilter"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

var (
	protected = []string{".bashrc", ".claude/", ".envrc", ".git/config", ".git/hooks/", ".idea/", ".profile", ".vscode/", ".zshrc"}
	ask       = []string{".git/hooks/", ".git/config", ".envrc", ".bashrc", ".zshrc", ".profile", ".claude/settings.json"}
)

type fixture struct {
	ws  string
	url string
	log *bytes.Buffer
}

// newFixture is fs as it starts without an operator key: every change to an ask path refused.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newGatedFixture(t, guard.GateApprover(nil))
}

func newGatedFixture(t *testing.T, gate guard.Approver) *fixture {
	t.Helper()
	f := &fixture{ws: t.TempDir(), log: &bytes.Buffer{}}
	if _, err := guard.Prepare(f.ws, protected); err != nil {
		t.Fatal(err)
	}
	rules, err := guard.Compile(guard.Policy{Protected: protected, Ask: ask, MaxFileSize: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := secretfilter.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := guard.Open(f.ws, rules, filter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ts := httptest.NewServer(newServer(g, gate, rules.MaxFileSize(), slog.New(slog.NewJSONHandler(f.log, nil))).routes())
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

func (f *fixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws, rel))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func pemKey(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAPI(t *testing.T) {
	key := pemKey(t)
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		deny                     string // X-Sharness-Deny
		inBody                   string
		file, content            string // afterwards
	}{
		{"write", "POST", "/v1/write", `{"path":".claude/commands/hello.md","content":"hi\n"}`, 200, "",
			`{"ok":true,"path":".claude/commands/hello.md","bytes":3,"exec_bits_stripped":false,"created":true}`, ".claude/commands/hello.md", "hi\n"},
		{"write base64", "POST", "/v1/write", `{"path":".vscode/bin","content_base64":"AAEC/w=="}`, 200, "", `"bytes":4`, ".vscode/bin", "\x00\x01\x02\xff"},
		{"exec bits stripped", "POST", "/v1/write", `{"path":".claude/commands/old.md","content":"x","mode":"0755"}`, 200, "", `"exec_bits_stripped":true`, ".claude/commands/old.md", "x"},
		{"secret", "POST", "/v1/write", js(map[string]string{"path": ".claude/commands/old.md", "content": key}), 403, "secret", "private-key", ".claude/commands/old.md", "old\n"},
		{"symlink", "POST", "/v1/write", `{"path":".claude/escape/passwd","content":"x"}`, 403, "symlink", "", ".claude/commands/old.md", "old\n"},
		{"dot dot", "POST", "/v1/write", `{"path":".claude/../.claude/commands/old.md","content":"x"}`, 403, "bad_path", "", ".claude/commands/old.md", "old\n"},
		{"oversized content", "POST", "/v1/write", js(map[string]string{"path": ".claude/commands/old.md", "content": strings.Repeat("a", 1025)}), 413, "too_large", "", ".claude/commands/old.md", "old\n"},
		{"oversized body", "POST", "/v1/write", js(map[string]string{"path": ".claude/commands/old.md", "content": strings.Repeat("a", 70<<10)}), 413, "too_large", "", ".claude/commands/old.md", "old\n"},
		{"ask without a gate", "POST", "/v1/write", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`, 403, "approval_unavailable", "approval", ".git/hooks/pre-commit", "<open " + "X" + ">"},
		{"not protected", "POST", "/v1/write", `{"path":"src/main.go","content":"x"}`, 403, "not_protected", "write it directly", "", ""},
		{"missing path", "POST", "/v1/write", `{"content":"x"}`, 400, "invalid_field", "field path", "", ""},
		{"missing content", "POST", "/v1/write", `{"path":".claude/x"}`, 400, "invalid_field", "field content", "", ""},
		{"both contents", "POST", "/v1/write", `{"path":".claude/x","content":"a","content_base64":"YQ=="}`, 400, "invalid_field", "content_base64", "", ""},
		{"bad base64", "POST", "/v1/write", `{"path":".claude/x","content_base64":"!!"}`, 400, "invalid_field", "content_base64", "", ""},
		{"mode as a number", "POST", "/v1/write", `{"path":".claude/x","content":"a","mode":420}`, 400, "invalid_field", "field mode", "", ""},
		{"bad mode", "POST", "/v1/write", `{"path":".claude/x","content":"a","mode":"4755"}`, 403, "mode", "", "", ""},
		{"unknown field", "POST", "/v1/write", `{"path":".claude/x","content":"a","owner":"root"}`, 400, "invalid_field", "owner", "", ""},
		{"duplicate key", "POST", "/v1/write", `{"path":".claude/x","content":"a","path":"src/x"}`, 400, "invalid_json", "duplicate", "", ""},
		{"case-variant key", "POST", "/v1/write", `{"path":".claude/x","content":"a","PATH":"src/x"}`, 400, "invalid_json", "case", "", ""},
		{"case-variant key alone", "POST", "/v1/write", `{"PATH":".claude/x","content":"a"}`, 400, "invalid_field", "unknown field", "", ""},
		{"trailing data", "POST", "/v1/write", `{"path":".claude/x","content":"a"} {}`, 400, "invalid_json", "", "", ""},
		{"not an object", "POST", "/v1/write", `["x"]`, 400, "invalid_json", "object", "", ""},
		{"delete", "POST", "/v1/delete", `{"path":".claude/commands/old.md"}`, 200, "", `"ok":true`, ".claude/commands/old.md", "<open X>"},
		{"delete protected root", "POST", "/v1/delete", `{"path":".claude/"}`, 403, "protected_root", "", "", ""},
		{"delete missing", "POST", "/v1/delete", `{"path":".claude/none"}`, 404, "not_found", "", "", ""},
		{"delete not empty", "POST", "/v1/delete", `{"path":".claude/commands"}`, 409, "not_empty", "", "", ""},
		{"rename", "POST", "/v1/rename", `{"from":".claude/commands/old.md","to":".vscode/old.md"}`, 200, "", `"path":".vscode/old.md"`, ".vscode/old.md", "old\n"},
		{"rename missing to", "POST", "/v1/rename", `{"from":".claude/commands/old.md"}`, 400, "invalid_field", "field to", "", ""},
		{"rename a root", "POST", "/v1/rename", `{"from":".vscode","to":".claude/vscode"}`, 403, "protected_root", "", "", ""},
		{"healthz", "GET", "/healthz", "", 200, "", `{"ok":true}`, "", ""},
		{"no such endpoint", "GET", "/v1/read", "", 404, "not_found", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			os.MkdirAll(filepath.Join(f.ws, ".claude/commands"), 0o755)
			os.WriteFile(filepath.Join(f.ws, ".claude/commands/old.md"), []byte("old\n"), 0o644)
			os.Symlink("/etc", filepath.Join(f.ws, ".claude/escape"))
			req, _ := http.NewRequest(c.method, f.url+c.path, strings.NewReader(c.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || resp.Header.Get("X-Sharness-Deny") != c.deny || !strings.Contains(string(body), c.inBody) {
				t.Fatalf("got %d, deny %q, body %s; want %d, deny %q, body with %q", resp.StatusCode, resp.Header.Get("X-Sharness-Deny"), body, c.status, c.deny, c.inBody)
			}
			if c.status != 200 && c.path != "/v1/read" {
				var e struct {
					Error struct{ Type, Reason, Message string }
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Reason != c.deny || e.Error.Type == "" || e.Error.Message == "" {
					t.Errorf("error body %s does not decode as {error:{type,reason,message}}", body)
				}
			}
			if c.file != "" {
				got := f.read(t, c.file)
				if strings.HasPrefix(c.content, "<open") {
					if !strings.HasPrefix(got, "<open") {
						t.Errorf("%s exists: %q", c.file, got)
					}
				} else if got != c.content {
					t.Errorf("%s = %q, want %q", c.file, got, c.content)
				}
			}
			if strings.Contains(f.log.String(), "BEGIN") || strings.Contains(f.log.String(), `"hi\n"`) {
				t.Errorf("the log holds content: %s", f.log)
			}
		})
	}
}

// TestLogLine: one canonical line per decision, with constant keys.
func TestLogLine(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Post(f.url+"/v1/write", "application/json", strings.NewReader(`{"path":".envrc","content":"export SECRET=1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(f.log.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log lines = %d, want 1: %s", len(lines), f.log)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "fs decision", "via": "http", "op": "write", "path": ".envrc", "decision": "deny", "reason": "approval_unavailable", "bytes": float64(15), "cause": "gate: none (no operator key or no gate folder)"} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v", k, rec[k], want)
		}
	}
	if strings.Contains(lines[0], "SECRET") {
		t.Errorf("the log holds content: %s", lines[0])
	}
}

func TestMCP(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 3 {
		t.Fatalf("ListTools = %v, %v; want 3 tools", list, err)
	}
	for _, c := range []struct {
		name, tool string
		args       any
		isError    bool
		text       string
	}{
		{"write", "fs_write", map[string]any{"path": ".vscode/settings.json", "content": "{}\n"}, false, `"ok":true`},
		{"write base64", "fs_write", map[string]any{"path": ".vscode/b", "content_base64": base64.StdEncoding.EncodeToString([]byte("b"))}, false, `"bytes":1`},
		{"ask without a gate", "fs_write", map[string]any{"path": ".git/hooks/pre-commit", "content": "x"}, true, "approval_unavailable: "},
		{"secret", "fs_write", map[string]any{"path": ".vscode/k", "content": pemKey(t)}, true, "secret: "},
		{"missing path", "fs_write", map[string]any{"content": "x"}, true, "invalid_field: field path: missing"},
		{"no arguments", "fs_delete", nil, true, "invalid_field: field path: missing"},
		{"unknown field", "fs_delete", map[string]any{"path": ".vscode/b", "recursive": true}, true, "invalid_field: unknown field \"recursive\" (delete takes path)"},
		{"wrong type", "fs_write", map[string]any{"path": 7, "content": "x"}, true, "invalid_field: field path"},
		{"rename", "fs_rename", map[string]any{"from": ".vscode/b", "to": ".claude/b"}, false, `"path":".claude/b"`},
		{"delete root", "fs_delete", map[string]any{"path": ".claude/"}, true, "protected_root: "},
		{"delete", "fs_delete", map[string]any{"path": ".claude/b"}, false, `"ok":true`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if res.IsError != c.isError || !strings.Contains(text, c.text) {
				t.Errorf("got error %v, %q; want error %v, with %q", res.IsError, text, c.isError, c.text)
			}
		})
	}
	if got := f.read(t, ".vscode/settings.json"); got != "{}\n" {
		t.Errorf("settings.json = %q", got)
	}
}

// TestRunRefuses: run stops, with a reason, before serving anything it cannot serve safely.
func TestRunRefuses(t *testing.T) {
	dir := "../../policies/default"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, component, hash, want string }{
		{"no policy hash", "fs", "", "no policy hash"},
		{"not fs", "llm", m.Hash, "is kind llm, not fs"},
		{"protected paths missing", "fs", m.Hash, "run `sharness-ai workspace init`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(session.EnvPolicyHash, c.hash)
			t.Setenv(session.EnvPolicyKey, "")
			t.Setenv(session.EnvComponent, c.component)
			err := run(context.Background(), config{policyDir: dir, listen: "127.0.0.1:0", workspace: t.TempDir()}, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run: %v, want %q", err, c.want)
			}
		})
	}
}

func TestCompileRules(t *testing.T) {
	yes := true
	c := &pbp.Component{Protected: []string{".claude/"}, Business: pbp.Business{FS: &pbp.FSRules{MaxFileSize: "2Ki", ExecBits: &yes, Ask: []string{".claude/x"}}}}
	r, err := compileRules(c)
	if err != nil || r.MaxFileSize() != 2048 {
		t.Fatalf("compileRules = %v, %v", r, err)
	}
	c.Business.FS.MaxFileSize = "lots"
	if _, err := compileRules(c); err == nil || !strings.Contains(err.Error(), "max_file_size") {
		t.Fatalf("compileRules = %v, want a max_file_size error", err)
	}
	if r, err := compileRules(&pbp.Component{}); err != nil || r.MaxFileSize() != guard.DefaultMaxFileSize {
		t.Fatalf("compileRules(no business.fs) = %v, %v", r, err)
	}
}
