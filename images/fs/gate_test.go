package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// fakeGate answers after delay, or refuses with approval_timeout when the request's context
// ends first, and records the summaries it was asked about.
type fakeGate struct {
	answer guard.Approval
	delay  time.Duration
	mu     sync.Mutex
	asked  []string // action: summary
	left   chan struct{}
}

func (f *fakeGate) Approve(ctx context.Context, action string, _ []byte, summary string) (guard.Approval, error) {
	f.mu.Lock()
	f.asked = append(f.asked, action+": "+summary)
	f.mu.Unlock()
	select {
	case <-time.After(f.delay):
		return f.answer, nil
	case <-ctx.Done():
		close(f.left)
		return guard.Approval{Reason: guard.ReasonTimeout}, ctx.Err()
	}
}

var approved = guard.Approval{OK: true, Reason: "approved"}

// TestApproval is the decision path of a change to an ask path through fs's API, with a fake gate.
func TestApproval(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		answer           guard.Approval
		delay            time.Duration
		status           int
		deny             string
		asked            string // "" not asked
		file, content    string // afterwards; content "" absent
	}{
		{"approved", "/v1/write", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`, approved, 0, 200, "",
			"fs.write: write .git/hooks/pre-commit (10 bytes)", ".git/hooks/pre-commit", "#!/bin/sh\n"},
		{"approved after a long wait", "/v1/write", `{"path":".envrc","content":"export A=1\n","mode":"0600"}`, approved, 1500 * time.Millisecond, 200, "",
			"fs.write: write .envrc (11 bytes, mode 0600)", ".envrc", "export A=1\n"},
		{"denied", "/v1/write", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`, guard.Approval{Reason: guard.ReasonDenied}, 0, 403, "approval_denied",
			"fs.write: write .git/hooks/pre-commit (10 bytes)", ".git/hooks/pre-commit", ""},
		{"timeout", "/v1/write", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`, guard.Approval{Reason: guard.ReasonTimeout}, 0, 403, "approval_timeout",
			"fs.write: write .git/hooks/pre-commit (10 bytes)", ".git/hooks/pre-commit", ""},
		{"approval never lets key material through", "/v1/write", js(map[string]string{"path": ".envrc", "content": pemKey(t)}), approved, 0, 403, "secret",
			"", ".envrc", "old\n"},
		{"nor more than the size cap", "/v1/write", js(map[string]string{"path": ".git/hooks/big", "content": strings.Repeat("a", 1025)}), approved, 0, 413, "too_large",
			"", ".git/hooks/big", ""},
		{"approved delete", "/v1/delete", `{"path":".git/hooks/pre-push"}`, approved, 0, 200, "",
			"fs.delete: delete .git/hooks/pre-push", ".git/hooks/pre-push", ""},
		{"approved rename", "/v1/rename", `{"from":".claude/commands/old.md","to":".git/hooks/pre-commit"}`, approved, 0, 200, "",
			"fs.rename: rename .claude/commands/old.md to .git/hooks/pre-commit (4 bytes, mode 0644)", ".git/hooks/pre-commit", "old\n"},
		{"not an ask path", "/v1/write", `{"path":".claude/x","content":"x"}`, guard.Approval{Reason: guard.ReasonDenied}, 0, 200, "",
			"", ".claude/x", "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &fakeGate{answer: c.answer, delay: c.delay, left: make(chan struct{})}
			f := newGatedFixture(t, g)
			os.MkdirAll(filepath.Join(f.ws, ".claude/commands"), 0o755)
			os.WriteFile(filepath.Join(f.ws, ".claude/commands/old.md"), []byte("old\n"), 0o644)
			os.WriteFile(filepath.Join(f.ws, ".git/hooks/pre-push"), []byte("#!/bin/sh\n"), 0o644)
			os.WriteFile(filepath.Join(f.ws, ".envrc"), []byte("old\n"), 0o644)
			resp, err := http.Post(f.url+c.path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || resp.Header.Get("X-Sharness-Deny") != c.deny {
				t.Fatalf("got %d, deny %q, body %s; want %d, deny %q", resp.StatusCode, resp.Header.Get("X-Sharness-Deny"), body, c.status, c.deny)
			}
			if c.deny != "" && !strings.Contains(string(body), `"reason":"`+c.deny+`"`) {
				t.Errorf("error body %s does not name the reason", body)
			}
			if asked := strings.Join(g.asked, "\n"); asked != c.asked {
				t.Errorf("the gate was asked %q, want %q", asked, c.asked)
			}
			if got := f.read(t, c.file); c.content == "" && !strings.HasPrefix(got, "<open") || c.content != "" && got != c.content {
				t.Errorf("%s = %q, want %q", c.file, got, c.content)
			}
			var rec map[string]any
			json.Unmarshal([]byte(strings.TrimSpace(f.log.String())), &rec)
			if want := c.answer.Reason; c.asked != "" && (rec["reason"] != string(want) || !strings.HasPrefix(rec["digest"].(string), "sha256:")) {
				t.Errorf("log line %s: want reason %s and the request's digest", f.log, want)
			}
		})
	}
}

// TestApprovalWaitEndsWithTheRequest: a client that gives up ends the wait, and nothing is written.
func TestApprovalWaitEndsWithTheRequest(t *testing.T) {
	g := &fakeGate{answer: approved, delay: time.Minute, left: make(chan struct{})}
	f := newGatedFixture(t, g)
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if resp, err := client.Post(f.url+"/v1/write", "application/json", strings.NewReader(`{"path":".envrc","content":"x"}`)); err == nil {
		resp.Body.Close()
		t.Fatalf("the request returned %d before the gate decided", resp.StatusCode)
	}
	select {
	case <-g.left:
	case <-time.After(5 * time.Second):
		t.Fatal("the gate still waits for a client that left")
	}
	time.Sleep(50 * time.Millisecond)
	if got := f.read(t, ".envrc"); got != "" {
		t.Errorf(".envrc = %q, want it untouched", got)
	}
}

func TestApprovalMCP(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  guard.Approval
		isError bool
		text    string
	}{
		{"approved", approved, false, `"ok":true`},
		{"denied", guard.Approval{Reason: guard.ReasonDenied}, true, "approval_denied: the write of \".git/hooks/pre-commit\" needs a person's approval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newGatedFixture(t, &fakeGate{answer: c.answer, delay: 300 * time.Millisecond, left: make(chan struct{})})
			ctx := context.Background()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url + "/mcp"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs_write", Arguments: map[string]any{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}})
			if err != nil {
				t.Fatal(err)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; res.IsError != c.isError || !strings.Contains(text, c.text) {
				t.Errorf("got error %v, %q; want error %v, with %q", res.IsError, text, c.isError, c.text)
			}
			if _, err := os.Stat(filepath.Join(f.ws, ".git/hooks/pre-commit")); (err == nil) == c.isError {
				t.Errorf("pre-commit written: %v, want %v", err == nil, !c.isError)
			}
		})
	}
}

// TestApprovalWithGate: fs's API with the real gate and an operator deciding through gate.Decide.
func TestApprovalWithGate(t *testing.T) {
	dir, keyFile := t.TempDir(), filepath.Join(t.TempDir(), "operator.key")
	pub, err := gate.GenerateOperatorKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := gate.ReadOperatorKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.Open(gate.Config{Dir: dir, Component: "fs", Policy: "sha256:" + strings.Repeat("b", 64), Operator: pub, Tiers: guard.Tiers, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := newGatedFixture(t, guard.GateApprover(g))
	for _, d := range []gate.Decision{gate.Deny, gate.Approve} {
		seen := make(chan gate.Request, 1)
		go func() {
			for range 500 {
				if reqs, _ := gate.List(dir); len(reqs) > 0 {
					if _, err := gate.Decide(dir, reqs[0].ID, d, priv, gate.ScopeOnce, 0); err != nil {
						t.Error(err)
					}
					seen <- reqs[0]
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			close(seen)
		}()
		f.log.Reset()
		resp, err := http.Post(f.url+"/v1/write", "application/json", strings.NewReader(`{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		r := <-seen
		want, deny := 200, ""
		if d == gate.Deny {
			want, deny = 403, "approval_denied"
		}
		if resp.StatusCode != want || resp.Header.Get("X-Sharness-Deny") != deny {
			t.Errorf("%s: got %d %q, want %d %q", d, resp.StatusCode, resp.Header.Get("X-Sharness-Deny"), want, deny)
		}
		if r.Action != "fs.write" || r.Tier != gate.Every || r.Summary != "write .git/hooks/pre-commit (10 bytes)" || !strings.Contains(f.log.String(), `"digest":"`+r.Digest+`"`) {
			t.Errorf("%s: the operator saw %+v; fs logged %s", d, r, f.log)
		}
	}
	if got := f.read(t, ".git/hooks/pre-commit"); got != "#!/bin/sh\n" {
		t.Errorf("pre-commit = %q after the approval", got)
	}
}

// TestRunGate: fs starts without an operator key or gate folder and says what is missing; a
// key that does not parse, or a bad timeout, stops it.
func TestRunGate(t *testing.T) {
	dir := "../../policies/default"
	m, err := pbp.Load(os.DirFS(dir), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(session.EnvPolicyHash, m.Hash)
	t.Setenv(session.EnvPolicyKey, "")
	t.Setenv(session.EnvComponent, "fs")
	t.Setenv(audit.EnvDir, t.TempDir())
	ca := mtlstest.NewCA(t, m.TrustDomain)
	id := struct {
		*x509svid.SVID
		*x509bundle.Bundle
	}{ca.SVID(t, "fs"), ca.Bundle()}
	ws := t.TempDir()
	if _, err := guard.Prepare(ws, m.Component("fs").Protected); err != nil {
		t.Fatal(err)
	}
	missing, present := filepath.Join(t.TempDir(), "none"), t.TempDir()
	pub, err := gate.GenerateOperatorKey(filepath.Join(t.TempDir(), "operator.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, gateDir, operator, timeout, want string }{
		{"gate", present, gate.FormatPublicKey(pub), "90s", `"approval_gate":true,"gate_dir":"` + present + `","gate_timeout":"90s"`},
		{"no key, no folder", missing, "", "2m", `"missing":"no operator public key (SHARNESS_AI_OPERATOR_PUBKEY), no gate folder ` + missing + `"`},
		{"no key", present, "", "2m", `"missing":"no operator public key (SHARNESS_AI_OPERATOR_PUBKEY)"`},
		{"bad key", present, "ed25519:AAAA", "2m", "refusing to start: approval gate"},
		{"bad timeout", missing, "", "soon", `refusing to start: approval gate in ` + missing + `: gate timeout "soon" is not a positive duration`},
		{"zero timeout", missing, "", "0s", `refusing to start: approval gate in ` + missing + `: gate timeout "0s" is not a positive duration`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var log strings.Builder
			logged := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
			h := slog.NewJSONHandler(writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return log.Write(b) }), nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, config{policyDir: dir, listen: "127.0.0.1:0", workspace: ws, gate: gate.Settings{Dir: c.gateDir, Timeout: c.timeout, Operator: c.operator}, identity: id}, slog.New(h))
			}()
			var err error
			for deadline := time.Now().Add(5 * time.Second); err == nil; {
				if strings.Contains(logged(), "sharness-fs serving") || time.Now().After(deadline) {
					cancel()
				}
				select {
				case err = <-done:
					err = fmt.Errorf("run: %v", err)
				case <-time.After(20 * time.Millisecond):
				}
			}
			if got := logged() + err.Error(); !strings.Contains(got, c.want) {
				t.Errorf("%s\nwant %q", got, c.want)
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
