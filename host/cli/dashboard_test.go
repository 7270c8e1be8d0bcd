package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
)

// TestDashboardRefuses: an address off loopback, a bad policy hash, an unusable key that was
// asked for, and a wrong project stop the verb before it serves.
func TestDashboardRefuses(t *testing.T) {
	projectSession(t, sessionRecord)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("SHARNESS_AI_OPERATOR_KEY", "")
	open := filepath.Join(t.TempDir(), "operator.key")
	if _, err := gate.GenerateOperatorKey(open); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	base := []string{"dashboard", "--project", "demo", "--policy-hash", auditPolicy}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"all interfaces", append(base, "--listen", "0.0.0.0:0"), ExitUsage, "the dashboard serves the host's loopback only"},
		{"a host name", append(base, "--listen", "localhost:8080"), ExitUsage, "loopback only"},
		{"bad policy hash", []string{"dashboard", "--project", "demo", "--policy-hash", "abc"}, ExitUsage, "--policy-hash"},
		{"a key others can read", append(base, "--key", open), ExitRefused, "chmod 600"},
		{"a missing key asked for", append(base, "--key", open+".missing"), ExitUsage, "sharness-ai operator init"},
		{"no such project", []string{"dashboard", "--project", "nothing", "--policy-hash", auditPolicy}, ExitUsage, "no volume nothing_audit-<component> (docker volume ls): is the project name right?"},
		{"files with --project", append(base, "logs/"), ExitUsage, "give no log files nor --ca with it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}

// TestDashboardServes: with --project the page shows the project's logs verified against the
// session record's CA and the requests in its gate volumes, prints its URL with --json, and
// stops cleanly on SIGINT.
func TestDashboardServes(t *testing.T) {
	root, ca, _ := projectSession(t, sessionRecord)
	gateDir := filepath.Join(root, "demo_gate-fs", "_data") // projectSession's engine lists it
	os.MkdirAll(gateDir, 0o755)
	key := filepath.Join(t.TempDir(), "operator.key")
	pub, err := gate.GenerateOperatorKey(key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.Open(gate.Config{Dir: gateDir, Component: "fs", Policy: auditPolicy, Operator: pub, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	verdict := make(chan gate.Verdict, 1)
	go func() {
		v, _ := g.Ask(ctx, "fs.write", []byte("hook"), "write .git/hooks/pre-commit (4 bytes)")
		verdict <- v
	}()

	outR, outW := io.Pipe()
	var errOut bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- execute([]string{"dashboard", "--json", "--project", "demo", "--policy-hash", auditPolicy, "--key", key, "--listen", "127.0.0.1:0"}, outW, &errOut, testEngine(t))
		outW.Close()
	}()
	var printed struct{ URL string }
	if err := json.NewDecoder(outR).Decode(&printed); err != nil || !strings.HasPrefix(printed.URL, "http://127.0.0.1:") || !strings.Contains(printed.URL, "/?token=") {
		t.Fatalf("dashboard --json printed %+v (%v)", printed, err)
	}
	go io.Copy(io.Discard, outR)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	if resp, err := client.Get(printed.URL); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open the printed URL: %v %v", resp, err)
	}
	base := printed.URL[:strings.Index(printed.URL, "/?")]
	var s struct {
		Policy    struct{ Hash string }
		SessionCA string `json:"session_ca"`
		Problems  []string
		Logs      []struct{ Component, Status, Detail string }
		Pending   []struct{ ID, Summary string }
	}
	for deadline := time.Now().Add(10 * time.Second); len(s.Pending) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(base + "/api/state")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
	}
	if s.Policy.Hash != auditPolicy || s.SessionCA != audit.CAHash(ca.Cert()) || len(s.Problems) != 0 || len(s.Logs) != 3 {
		t.Errorf("state: %+v", s)
	}
	for _, l := range s.Logs {
		if l.Status != "ok" {
			t.Errorf("log of %s: %s %s", l.Component, l.Status, l.Detail)
		}
	}
	if len(s.Pending) != 1 || !strings.Contains(s.Pending[0].Summary, "pre-commit") {
		t.Fatalf("pending: %+v (the gate volume demo_gate-fs was not found?)", s.Pending)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/decide", strings.NewReader(`{"id":"`+s.Pending[0].ID+`","decision":"approve","scope":"once"}`))
	req.Header.Set("Origin", base)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %v %v", resp, err)
	}
	if v := <-verdict; !v.Approved() {
		t.Errorf("the component's verdict: %s", v.Reason())
	}

	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case c := <-code:
		if c != ExitOK {
			t.Errorf("exit %d after SIGINT: %s", c, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dashboard did not stop on SIGINT")
	}
	if line := errOut.String(); !strings.Contains(line, `"msg":"dashboard decision"`) || !strings.Contains(line, `"decision":"approve"`) || strings.Contains(line, printed.URL[strings.Index(printed.URL, "=")+1:]) {
		t.Errorf("the decision's log line (and never the token):\n%s", line)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Error("the dashboard still answers after SIGINT")
	}
}

// TestDashboardReadOnly: without a key at the default path, the page serves read-only and says
// why; --read-only does so even with a key.
func TestDashboardReadOnly(t *testing.T) {
	projectSession(t, sessionRecord)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("SHARNESS_AI_OPERATOR_KEY", "")
	for _, tc := range []struct {
		name, want string
		readOnly   bool
	}{
		{"no key at the default path", "no operator key at " + filepath.Join(cfg, "sharness-ai", "operator.key") + " (make one with `sharness-ai operator init`, or pass --key)", false},
		{"--read-only", "started with --read-only", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := (&app{}).dashboardCmd()
			if tc.readOnly {
				if _, err := gate.GenerateOperatorKey(filepath.Join(cfg, "sharness-ai", "operator.key")); err != nil {
					t.Fatal(err)
				}
			}
			key, why, err := dashboardKey(cmd, defaultOperatorKey(), tc.readOnly)
			if err != nil || key != nil || why != tc.want {
				t.Errorf("key %v, read-only %q, %v; want %q", key != nil, why, err, tc.want)
			}
		})
	}
	key := filepath.Join(cfg, "sharness-ai", "operator.key")
	got, why, err := dashboardKey((&app{}).dashboardCmd(), key, false)
	if err != nil || len(got) != ed25519.PrivateKeySize || why != "" {
		t.Errorf("the default key: %v %q %v", got != nil, why, err)
	}
}
