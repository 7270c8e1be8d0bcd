package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
	"github.com/sharness-ai/sharness/internal/secretfilter"
)

// fakeKey is shaped like an Anthropic API key, made at run time so that no key is in the source.
func fakeKey() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	b := make([]byte, 93)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return "sk-ant-api03-" + string(b) + "AA"
}

// syncBuffer is a log sink the handler goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var testSandbox = sync.OnceValues(func() (*sandbox.Sandbox, error) {
	f := sandbox.Check(context.Background())
	f.Root = false // the process limit is images/bash/sandbox's to test (as nobody)
	s, _, err := sandbox.Plan(f, false)
	return s, err
})

// connect serves the tool over streamable HTTP, as main does, and returns a client session.
func connect(t testing.TB, pol policy, opts ...func(*tool)) (*mcp.ClientSession, string, *syncBuffer) {
	t.Helper()
	sb, err := testSandbox()
	if err != nil {
		t.Fatalf("this host cannot run sandboxes: %v", err)
	}
	ws, err := os.MkdirTemp("/var/tmp", "sharness-bash-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.Mkdir(ws+"/src", 0o755)
	filter, err := secretfilter.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := mcp.NewServer(&mcp.Implementation{Name: "sharness-bash", Version: "test"}, nil)
	tl := &tool{sb: sb, pol: pol, workspace: ws, filter: filter, log: slog.New(slog.NewJSONHandler(logs, nil))}
	for _, o := range opts {
		o(tl)
	}
	tl.add(s)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, ws, logs
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t *testing.T, r *mcp.CallToolResult) output {
	t.Helper()
	var o output
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return o
}

func TestTool(t *testing.T) {
	cs, _, logs := connect(t, policy{profiles: []string{"analyse", "build"}, proxy: "net:3128"})
	ctx := context.Background()
	key := fakeKey()
	tests := []struct {
		name      string
		args      map[string]any
		wantErr   string // a protocol error's text (a substring)
		wantIsErr string // a tool error's text (a substring)
		wantText  []string
		check     func(t *testing.T, o output)
	}{
		{name: "echo", args: map[string]any{"command": "echo ok"}, wantText: []string{"exit code: 0\n", "--- stdout ---\nok\n"},
			check: func(t *testing.T, o output) {
				if o.Stdout != "ok\n" || o.ExitCode != 0 || o.StdoutBytes != 3 || o.Redacted == nil {
					t.Errorf("output %+v", o)
				}
			}},
		{name: "exit code and stderr", args: map[string]any{"command": "echo oops >&2; exit 3", "cwd": "src"},
			wantText: []string{"exit code: 3\n", "--- stderr ---\noops\n"}},
		{name: "planted key", args: map[string]any{"command": "echo " + key + "; echo " + key + " >&2"},
			wantText: []string{"[REDACTED:anthropic-api-key]", "[redacted secrets matching: anthropic-api-key]"},
			check: func(t *testing.T, o output) {
				if strings.Contains(o.Stdout+o.Stderr, key[:30]) || len(o.Redacted) != 1 || o.Redacted[0] != "anthropic-api-key" {
					t.Errorf("the key came through: %+v", o)
				}
			}},
		{name: "truncated", args: map[string]any{"command": "head -c 2000000 /dev/zero | tr '\\0' a"},
			wantText: []string{"[stdout truncated: 2000000 bytes written, the first 1048576 kept]"},
			check: func(t *testing.T, o output) {
				if !o.StdoutTruncated || o.StdoutBytes != 2000000 || len(o.Stdout) != 1<<20 {
					t.Errorf("truncated %v, %d bytes, %d kept", o.StdoutTruncated, o.StdoutBytes, len(o.Stdout))
				}
			}},
		{name: "timeout", args: map[string]any{"command": "sleep 30", "timeout": 1},
			wantText: []string{"exit code: 137 (SIGKILL)\n", "timed out after 1s: the sandbox was killed"},
			check: func(t *testing.T, o output) {
				if !o.TimedOut || o.Signal != "SIGKILL" {
					t.Errorf("output %+v", o)
				}
			}},
		{name: "admin", args: map[string]any{"command": "id", "profile": "admin"}, wantIsErr: `refused: profile "admin" is not allowed by the policy`},
		{name: "invalid profile", args: map[string]any{"command": "id", "profile": "root"}, wantErr: `invalid argument "profile": "root" is not one of analyse, build, admin`},
		{name: "missing command", args: map[string]any{"profile": "analyse"}, wantErr: `invalid argument "command": required`},
		{name: "escaping cwd", args: map[string]any{"command": "id", "cwd": "../etc"}, wantErr: `invalid argument "cwd"`},
		{name: "missing cwd", args: map[string]any{"command": "id", "cwd": "nope"}, wantErr: `invalid argument "cwd": "nope" is not a folder inside the workspace`},
		{name: "timeout 0", args: map[string]any{"command": "id", "timeout": 0}, wantErr: `invalid argument "timeout"`},
		{name: "unknown field", args: map[string]any{"command": "id", "env": "X=1"}, wantErr: `invalid argument "env": unknown field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: tt.args})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CallTool error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if got := text(res); tt.wantIsErr != "" {
				if !res.IsError || !strings.Contains(got, tt.wantIsErr) {
					t.Fatalf("result %q (IsError %v), want a tool error %q", got, res.IsError, tt.wantIsErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", text(res))
			}
			for _, w := range tt.wantText {
				if got := text(res); !strings.Contains(got, w) {
					t.Errorf("text %q lacks %q", got[:min(len(got), 500)], w)
				}
			}
			if tt.check != nil {
				tt.check(t, structured(t, res))
			}
		})
	}
	log := logs.String()
	if strings.Contains(log, key[:20]) || strings.Contains(log, "echo ok") || strings.Contains(log, "oops") {
		t.Errorf("the log holds a command or its output:\n%s", log)
	}
	for _, w := range []string{`"msg":"bash command"`, `"command_sha256":"`, `"decision":"refused"`, `"decision":"invalid"`, `"redactions":1`, `"timed_out":true`} {
		if !strings.Contains(log, w) {
			t.Errorf("the log lacks %s:\n%s", w, log)
		}
	}
}

func TestToolRefusesByPolicy(t *testing.T) {
	tests := []struct {
		name    string
		pol     policy
		profile string
		want    string
	}{
		{"build not allowed", policy{profiles: []string{"analyse"}, proxy: "net:3128"}, "build", `refused: profile "build" is not allowed by the policy`},
		{"analyse not allowed", policy{profiles: []string{"build"}, proxy: "net:3128"}, "analyse", `refused: profile "analyse" is not allowed by the policy`},
		{"build without net", policy{profiles: []string{"analyse", "build"}}, "build", "refused: build and admin need the proxy"},
		{"admin without net", policy{profiles: []string{"analyse", "admin"}}, "admin", "refused: build and admin need the proxy"},
		{"admin not allowed", policy{profiles: []string{"analyse", "build"}, proxy: "net:3128"}, "admin", `refused: profile "admin" is not allowed by the policy`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _, _ := connect(t, tt.pol)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "id", "profile": tt.profile}})
			if err != nil || !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Fatalf("CallTool = %v, %v; want a tool error %q", res, err, tt.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		o    output
		want string
	}{
		{"silent", output{}, "exit code: 0\n"},
		{"no newline", output{ExitCode: 1, Stdout: "a", StdoutBytes: 1}, "exit code: 1\n--- stdout ---\na\n"},
		{"both", output{Stdout: "a\n", StdoutBytes: 2, Stderr: "b\n", StderrBytes: 2}, "exit code: 0\n--- stdout ---\na\n--- stderr ---\nb\n"},
		{"truncated stderr", output{Stderr: "bb", StderrBytes: 9, StderrTruncated: true, stderrKept: 2}, "exit code: 0\n--- stderr ---\nbb\n[stderr truncated: 9 bytes written, the first 2 kept]\n"},
		{"timed out", output{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, "exit code: 137 (SIGKILL)\ntimed out after 1m0s: the sandbox was killed\n"},
		{"redacted", output{Stdout: "[REDACTED:x]", StdoutBytes: 40, Redacted: []string{"x", "y"}}, "exit code: 0\n--- stdout ---\n[REDACTED:x]\n[redacted secrets matching: x, y]\n"},
	}
	for _, tt := range tests {
		if got := summary(tt.o, args{Timeout: 60e9}); got != tt.want {
			t.Errorf("%s: summary = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text\n", "plain text\n"},
		{"tab\tcr\r\n", "tab\tcr\r\n"},
		{"nul\x00esc\x1b[0mdel\x7f", "nul\uFFFDesc\uFFFD[0mdel\uFFFD"},
		{"bad \xff utf-8 \xe2\x82", "bad \uFFFD utf-8 \uFFFD"},
		{"ünïcødé ✓", "ünïcødé ✓"},
		{"a run \xff\xfe\x80 then \xc3", "a run \uFFFD then \uFFFD"},
		{"runs apart \xffa\xff", "runs apart \uFFFDa\uFFFD"},
		{"a control inside a run \xff\x00\xff", "a control inside a run \uFFFD\uFFFD\uFFFD"},
		{"U+FFFD itself \uFFFD\xff and C1 \u0085", "U+FFFD itself \uFFFD\uFFFD and C1 \u0085"},
		{"\x00", "\uFFFD"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := printable([]byte(tt.in)); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// printableReference is printable's definition, which printable computes in one pass.
func printableReference(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(string(b), "\uFFFD"))
}

// FuzzPrintable: printable is its definition, on any bytes a command prints.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"plain text\n", "tab\tcr\r\n", "nul\x00esc\x1b[0mdel\x7f", "bad \xff utf-8 \xe2\x82",
		"ünïcødé ✓", "\xff\xfe\x80", "\xef\xbf\xbd\xed\xa0\x80", "\xf4\x90\x80\x80\xc0\xaf"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := printable(b), printableReference(b); got != want {
			t.Fatalf("printable(%q) = %q, want %q", b, got, want)
		}
	})
}
