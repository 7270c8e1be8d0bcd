package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
	"github.com/sharness-ai/sharness/internal/gate"
)

// operatorKey is the test's operator key: the test plays the person on the host.
var operatorKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))

var adminPolicy = policy{profiles: []string{"analyse", "build", "admin"}, proxy: "net:3128"}

// adminGate opens bash's gate in a fresh folder as main does, pinning operatorKey; a request
// waits 3 s.
func adminGate(t *testing.T) (*gate.Gate, string) {
	t.Helper()
	dir := t.TempDir()
	s := gate.Settings{Dir: dir, Timeout: "3s", Operator: gate.FormatPublicKey(operatorKey.Public().(ed25519.PublicKey))}
	g, err := s.Open(gate.Config{Component: "bash", Policy: "sha256:" + strings.Repeat("a", 64), Tiers: adminTiers, Poll: 10 * time.Millisecond}, "the admin profile")
	if err != nil || g == nil {
		t.Fatalf("open the gate: %v", err)
	}
	return g, dir
}

func withGate(g *gate.Gate) func(*tool) { return func(t *tool) { t.gate = g } }

type decided struct {
	req gate.Request
	err error
}

// operator waits for the next request listed in dir, as `sharness-ai pending` shows it, and
// decides it with decide.
func operator(dir string, decide func(gate.Request) error) <-chan decided {
	ch := make(chan decided, 1)
	go func() {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if reqs, err := gate.List(dir); err != nil || len(reqs) > 0 {
				if err == nil {
					err = decide(reqs[0])
				}
				ch <- decided{reqs[0], err}
				return
			}
		}
		ch <- decided{err: errors.New("no request was listed")}
	}()
	return ch
}

func approveOnce(dir string) func(gate.Request) error {
	return func(r gate.Request) error {
		_, err := gate.Decide(dir, r.ID, gate.Approve, operatorKey, gate.ScopeOnce, 0)
		return err
	}
}

func admin(t *testing.T, cs *mcp.ClientSession, command string) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "profile": "admin"}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return res, text(res)
}

func lines(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestAdminApprovedRunsOnce: an admin command waits for the person, who sees what it is and
// approves it; it runs once, with build's rights, and its output comes back. The same command
// again needs a new approval (none comes: approval_timeout), and the first approval planted for
// it is refused (approval_mismatch: it names another request). Neither runs.
func TestAdminApprovedRunsOnce(t *testing.T) {
	g, dir := adminGate(t)
	cs, ws, logs := connect(t, adminPolicy, withGate(g))
	const command = "echo ran >> ran.txt; cat ran.txt"
	ranFile := filepath.Join(ws, "ran.txt")

	// The person decides in a copy of the request's folder, so that the test keeps the token.
	var token []byte
	op := operator(dir, func(r gate.Request) error {
		shadow := t.TempDir()
		os.MkdirAll(filepath.Join(shadow, "pending"), 0o755)
		os.MkdirAll(filepath.Join(shadow, "decisions"), 0o755)
		b, err := os.ReadFile(filepath.Join(dir, "pending", r.ID+".json"))
		if err == nil {
			err = os.WriteFile(filepath.Join(shadow, "pending", r.ID+".json"), b, 0o644)
		}
		if err == nil {
			_, err = gate.Decide(shadow, r.ID, gate.Approve, operatorKey, gate.ScopeOnce, 0)
		}
		if err == nil {
			token, err = os.ReadFile(filepath.Join(shadow, "decisions", r.ID+".json"))
		}
		if err == nil {
			err = plant(dir, r.ID, token)
		}
		return err
	})
	res, got := admin(t, cs, command)
	d := <-op
	if d.err != nil {
		t.Fatalf("the operator: %v", d.err)
	}
	if res.IsError || structured(t, res).Stdout != "ran\n" {
		t.Fatalf("the approved command: %q (IsError %v)", got, res.IsError)
	}
	canonical, _, err := sandbox.AdminRequest(sandbox.Spec{Command: command, Profile: sandbox.Admin, Timeout: 60 * time.Second,
		Workspace: ws, ProxyAddr: adminPolicy.proxy})
	sum := sha256.Sum256(canonical)
	if err != nil || d.req.Action != "bash.admin" || d.req.Tier != gate.Every || d.req.Component != "bash" ||
		d.req.Summary != "admin: "+strconv.Quote(command) || d.req.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("the person saw %+v (%v); want the exact command, tier every", d.req, err)
	}
	if log := logs.String(); !strings.Contains(log, `"approval":"approved","approval_id":"`+d.req.ID+`"`) || !strings.Contains(log, `"decision":"ran"`) {
		t.Errorf("the log does not name the approval %s next to the run:\n%s", d.req.ID, log)
	}

	res, got = admin(t, cs, command) // nobody decides
	if !res.IsError || !strings.HasPrefix(got, "refused: approval_timeout: ") || !strings.Contains(got, "no decision came in time") {
		t.Errorf("the same command again: %q, want approval_timeout", got)
	}
	op = operator(dir, func(r gate.Request) error { return plant(dir, r.ID, token) })
	res, got = admin(t, cs, command)
	if d := <-op; d.err != nil || !res.IsError || !strings.HasPrefix(got, "refused: approval_mismatch: ") {
		t.Errorf("the first approval replayed: %q (%v), want approval_mismatch", got, d.err)
	}
	if n := lines(t, ranFile); n != 1 {
		t.Errorf("the command ran %d times, want once", n)
	}
	if log := logs.String(); !strings.Contains(log, `"approval":"approval_timeout"`) || !strings.Contains(log, `"approval":"approval_mismatch"`) {
		t.Errorf("the log lacks the refusals:\n%s", log)
	}
}

// plant writes token as the decision on request id, as the host's CLI does (all at once).
func plant(dir, id string, token []byte) error {
	tmp := filepath.Join(dir, "decisions", ".planted")
	if err := os.WriteFile(tmp, token, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "decisions", id+".json"))
}

// TestAdminDenied: a denied command does not run, and the agent reads why.
func TestAdminDenied(t *testing.T) {
	g, dir := adminGate(t)
	cs, ws, _ := connect(t, adminPolicy, withGate(g))
	op := operator(dir, func(r gate.Request) error {
		_, err := gate.Decide(dir, r.ID, gate.Deny, operatorKey, gate.ScopeOnce, 0)
		return err
	})
	res, got := admin(t, cs, "touch denied")
	if d := <-op; d.err != nil || !res.IsError || got != "refused: approval_denied: the admin profile needs a person's approval of each command: the operator denied it" {
		t.Errorf("the denied command: %q (%v)", got, d.err)
	}
	if _, err := os.Stat(filepath.Join(ws, "denied")); err == nil {
		t.Error("the denied command ran")
	}
}

// TestAdminRefusesASessionApproval: each admin command needs its own approval, so the host
// refuses `approve --session`; an approval for this one request then lets it run.
func TestAdminRefusesASessionApproval(t *testing.T) {
	g, dir := adminGate(t)
	cs, _, _ := connect(t, adminPolicy, withGate(g))
	var sessionErr error
	op := operator(dir, func(r gate.Request) error {
		_, sessionErr = gate.Decide(dir, r.ID, gate.Approve, operatorKey, gate.ScopeSession, 0)
		return approveOnce(dir)(r)
	})
	res, got := admin(t, cs, "echo once")
	if d := <-op; d.err != nil || res.IsError || !strings.Contains(got, "once") {
		t.Errorf("the command approved once: %q (%v)", got, d.err)
	}
	if sessionErr == nil || !strings.Contains(sessionErr.Error(), "session approval is refused") {
		t.Errorf("approve --session on an admin command: %v, want a refusal", sessionErr)
	}
}

// TestAdminWithoutGate: without an operator key (or gate folder) bash has no gate, and every
// admin command is refused with approval_unavailable, without running.
func TestAdminWithoutGate(t *testing.T) {
	g, err := gate.Settings{Dir: t.TempDir()}.Open(gate.Config{Component: "bash", Policy: "sha256:" + strings.Repeat("a", 64)}, "the admin profile")
	if g != nil || err != nil {
		t.Fatalf("Open without a key: %v, %v", g, err)
	}
	cs, ws, logs := connect(t, adminPolicy, withGate(g))
	res, got := admin(t, cs, "touch made")
	if !res.IsError || !strings.HasPrefix(got, "refused: approval_unavailable: ") {
		t.Errorf("admin without a gate: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "made")); err == nil {
		t.Error("the command ran")
	}
	if !strings.Contains(logs.String(), `"approval":"approval_unavailable"`) {
		t.Errorf("the log lacks the refusal:\n%s", logs.String())
	}
}

// TestAdminRefusesWhatCannotBeShownWhole: a command too long for the person to read whole in the
// request is refused before anyone is asked, naming why; nothing is pending, nothing runs.
func TestAdminRefusesWhatCannotBeShownWhole(t *testing.T) {
	g, dir := adminGate(t)
	cs, ws, _ := connect(t, adminPolicy, withGate(g))
	res, got := admin(t, cs, "touch made; "+strings.Repeat("true; ", 30))
	if !res.IsError || !strings.HasPrefix(got, "refused: admin_request: ") || !strings.Contains(got, "read whole") {
		t.Errorf("a long admin command: %q", got)
	}
	if reqs, err := gate.List(dir); err != nil || len(reqs) != 0 {
		t.Errorf("pending after the refusal: %v, %v", reqs, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "made")); err == nil {
		t.Error("the command ran")
	}
}
