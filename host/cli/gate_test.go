package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/testkit/enginetest"
)

// operatorKey makes an operator key with `operator init` and returns its path and public key.
func operatorKey(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "operator.key")
	code, out, errOut := run(t, "operator", "init", "--key", path, "--json")
	var got struct{ Key, Public string }
	if code != ExitOK || json.Unmarshal([]byte(out), &got) != nil || got.Key != path {
		t.Fatalf("operator init: exit %d\n%s%s", code, out, errOut)
	}
	return path, got.Public
}

// component opens a gate as a component would, in a fresh gate directory.
func component(t *testing.T, pubKey string, tiers map[string]gate.Tier) (*gate.Gate, string) {
	t.Helper()
	pub, err := gate.ParsePublicKey([]byte(pubKey))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g, err := gate.Open(gate.Config{Dir: dir, Component: "fs", Policy: "sha256:" + strings.Repeat("a", 64), Operator: pub,
		Tiers: tiers, Timeout: 10 * time.Second, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g, dir
}

// asking starts an Ask and returns its verdict's channel and, once `pending` lists it, its id.
func asking(t *testing.T, g *gate.Gate, dir string) (<-chan gate.Verdict, string) {
	t.Helper()
	ch := make(chan gate.Verdict, 1)
	go func() {
		v, _ := g.Ask(context.Background(), "fs.write", []byte(`{"path":".envrc"}`), "write .envrc")
		ch <- v
	}()
	for range 500 {
		code, out, errOut := run(t, "pending", "--json", "--gate-dir", dir)
		var rows []struct {
			Dir, ID, Action string
		}
		if code != ExitOK || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("pending: exit %d\n%s%s", code, out, errOut)
		}
		if len(rows) == 1 && rows[0].Dir == dir && rows[0].Action == "fs.write" {
			return ch, rows[0].ID
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the request was never listed")
	return nil, ""
}

func TestGateApproveAndDeny(t *testing.T) {
	key, pub := operatorKey(t)
	g, dir := component(t, pub, map[string]gate.Tier{"fs.write": gate.Once})

	verdict, id := asking(t, g, dir)
	code, out, errOut := run(t, "pending", "--gate-dir", dir)
	if code != ExitOK || !strings.Contains(out, id) || !strings.Contains(out, "write .envrc") {
		t.Errorf("pending: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, "approve", id, "--gate-dir", dir, "--key", key, "--ttl", "2m")
	if code != ExitOK || out != "approved "+id+": fs fs.write \"write .envrc\" (once, usable for 2m0s)\n" {
		t.Errorf("approve: exit %d\n%s%s", code, out, errOut)
	}
	if v := <-verdict; !v.Approved() {
		t.Errorf("the component got %s, want an approval", v.Reason())
	}
	if code, _, errOut := run(t, "approve", id, "--gate-dir", dir, "--key", key); code != ExitRefused || !strings.Contains(errOut, "no such pending request") {
		t.Errorf("approve again: exit %d, %s", code, errOut)
	}

	verdict, id = asking(t, g, dir)
	t.Setenv("SHARNESS_AI_GATE_DIRS", filepath.Join(t.TempDir(), "other")+":"+dir)
	t.Setenv("SHARNESS_AI_OPERATOR_KEY", key)
	if code, out, errOut := run(t, "deny", id); code != ExitOK || !strings.HasPrefix(out, "denied "+id) {
		t.Errorf("deny: exit %d\n%s%s", code, out, errOut)
	}
	if v := <-verdict; v.Approved() || v.Reason() != gate.ReasonDenied {
		t.Errorf("the component got %v %s, want a denial", v.Approved(), v.Reason())
	}
}

func TestGateSessionRefusedForTierEvery(t *testing.T) {
	key, pub := operatorKey(t)
	g, dir := component(t, pub, nil)
	verdict, id := asking(t, g, dir)
	code, _, errOut := run(t, "approve", id, "--session", "--gate-dir", dir, "--key", key)
	if code != ExitRefused || !strings.Contains(errOut, "session approval is refused") {
		t.Errorf("approve --session: exit %d, %s", code, errOut)
	}
	if code, _, errOut := run(t, "approve", id, "--gate-dir", dir, "--key", key); code != ExitOK {
		t.Errorf("approve: exit %d, %s", code, errOut)
	}
	if v := <-verdict; !v.Approved() {
		t.Errorf("the component got %s", v.Reason())
	}
}

func TestGateRefusals(t *testing.T) {
	key, _ := operatorKey(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "decisions"), 0o755)
	now := time.Now().UTC().Truncate(time.Second)
	for id, expires := range map[string]time.Time{"LIVELIVELIVELIVELIVELIVELI": now.Add(time.Hour), "OLDOLDOLDOLDOLDOLDOLDOLDOL": now.Add(-time.Minute)} {
		r := gate.Request{ID: id, Component: "fs", Action: "fs.write", Digest: "sha256:" + strings.Repeat("d", 64),
			Policy: "sha256:" + strings.Repeat("a", 64), Tier: gate.Once, Summary: "s", Created: now.Add(-time.Hour), Expires: expires}
		b, _ := json.Marshal(r)
		os.MkdirAll(filepath.Join(dir, "pending"), 0o755)
		os.WriteFile(filepath.Join(dir, "pending", id+".json"), b, 0o644)
	}
	loose := filepath.Join(t.TempDir(), "loose.key")
	data, _ := os.ReadFile(key)
	os.WriteFile(loose, data, 0o644)

	if code, _, _ := run(t, "approve", "LIVELIVELIVELIVELIVELIVELI", "--gate-dir", dir, "--key", key); code != ExitOK {
		t.Fatalf("first approve: exit %d", code)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"decided already", []string{"deny", "LIVELIVELIVELIVELIVELIVELI", "--gate-dir", dir, "--key", key}, ExitRefused, "already decided"},
		{"expired", []string{"approve", "OLDOLDOLDOLDOLDOLDOLDOLDOL", "--gate-dir", dir, "--key", key}, ExitRefused, "request expired"},
		{"unknown", []string{"approve", "NONENONENONENONENONENONENO", "--gate-dir", dir, "--key", key}, ExitRefused, "no such pending request"},
		{"a path", []string{"approve", "../used", "--gate-dir", dir, "--key", key}, ExitRefused, "no such pending request"},
		{"readable key", []string{"approve", "NONENONENONENONENONENONENO", "--gate-dir", dir, "--key", loose}, ExitRefused, "chmod 600"},
		{"missing key", []string{"approve", "NONENONENONENONENONENONENO", "--gate-dir", dir, "--key", loose + ".gone"}, ExitUsage, "operator init"},
		{"ttl too long", []string{"approve", "NONENONENONENONENONENONENO", "--gate-dir", dir, "--key", key, "--ttl", "9h"}, ExitUsage, "--ttl"},
		{"ttl zero", []string{"approve", "NONENONENONENONENONENONENO", "--gate-dir", dir, "--key", key, "--ttl", "0s"}, ExitUsage, "--ttl"},
		{"no gate dir", []string{"pending"}, ExitUsage, "no gate directory: pass --project or --gate-dir"},
		{"missing gate dir", []string{"pending", "--gate-dir", filepath.Join(dir, "nope")}, ExitRefused, "open gate directory"},
		{"key exists", []string{"operator", "init", "--key", key}, ExitRefused, "refusing to overwrite"},
	}
	t.Setenv("SHARNESS_AI_GATE_DIRS", "")
	for _, tc := range cases {
		code, out, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s%s", tc.name, code, tc.code, tc.want, out, errOut)
		}
	}
	if code, out, _ := run(t, "pending", "--gate-dir", dir); code != ExitOK || out != "no pending requests\n" {
		t.Errorf("pending with nothing to decide: exit %d\n%s", code, out)
	}
}

func TestOperatorKeyDefaultPath(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("SHARNESS_AI_OPERATOR_KEY", "")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	code, out, errOut := run(t, "operator", "init")
	want := filepath.Join(cfg, "sharness-ai", "operator.key")
	if st, err := os.Stat(want); code != ExitOK || err != nil || st.Mode().Perm() != 0o600 || !strings.Contains(out, "operator public key: ed25519:") {
		t.Errorf("operator init: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	env := filepath.Join(t.TempDir(), "env.key")
	t.Setenv("SHARNESS_AI_OPERATOR_KEY", env)
	if code, _, _ := run(t, "operator", "init"); code != ExitOK {
		t.Errorf("operator init with SHARNESS_AI_OPERATOR_KEY: exit %d", code)
	}
	if _, err := os.Stat(env); err != nil {
		t.Error(err)
	}
}

// TestGateByProject: with --project and no --gate-dir, pending and approve look in the project's
// volumes <project>_gate-<component>, found through docker (faked here), and in no other.
func TestGateByProject(t *testing.T) {
	key, pub := operatorKey(t)
	g, dir := component(t, pub, map[string]gate.Tier{"fs.write": gate.Once})
	t.Setenv("SHARNESS_AI_GATE_DIRS", "")
	e := &enginetest.Engine{Volumes: []enginetest.Volume{{Name: "demo_gate-fs", Mountpoint: dir}, {Name: "other_demo_gate-bash"}}}
	useAPI(t, e)
	verdict, id := asking(t, g, dir)
	if code, out, errOut := run(t, "pending", "-p", "demo"); code != ExitOK || !strings.Contains(out, id) {
		t.Errorf("pending -p demo: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "approve", id, "--project", "demo", "--key", key); code != ExitOK || !strings.HasPrefix(out, "approved "+id) {
		t.Errorf("approve --project demo: exit %d\n%s%s", code, out, errOut)
	}
	if v := <-verdict; !v.Approved() {
		t.Errorf("verdict %v after approve --project, want approved", v.Reason())
	}
	if code, _, errOut := run(t, "pending", "-p", "nope"); code == ExitOK || !strings.Contains(errOut, "no volume nope_gate-") {
		t.Errorf("pending -p nope: exit %d, %s", code, errOut)
	}
	if reqs := e.Requests(); slices.ContainsFunc(reqs, func(r string) bool { return strings.Contains(r, "other_demo") }) {
		t.Errorf("requests %q: read another project's volume", reqs)
	}
}

// TestPendingSkipsUnopenedProjectVolumes: a project's gate volume whose component has not started
// (no pending/ folder) holds no requests and is no error with --project; named with --gate-dir,
// it is reported.
func TestPendingSkipsUnopenedProjectVolumes(t *testing.T) {
	t.Setenv("SHARNESS_AI_GATE_DIRS", "")
	unopened := t.TempDir()
	useAPI(t, &enginetest.Engine{Volumes: []enginetest.Volume{{Name: "demo_gate-bash", Mountpoint: unopened}}})
	if code, out, errOut := run(t, "pending", "-p", "demo"); code != ExitOK || out != "no pending requests\n" {
		t.Errorf("pending -p demo: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, "pending", "--gate-dir", unopened); code != ExitRefused || !strings.Contains(errOut, "no component has opened this gate directory") {
		t.Errorf("pending --gate-dir (unopened): exit %d, %s", code, errOut)
	}
}
