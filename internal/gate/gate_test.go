package gate

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/policies/keys"
)

func writeTestFile(dir, name, content string) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)
}

func openGate(t *testing.T, tiers map[string]Tier, timeout time.Duration) (*Gate, string) {
	t.Helper()
	dir := t.TempDir()
	g, err := Open(Config{Dir: dir, Component: "fs", Policy: hash('a'), Operator: pub(operator), Tiers: tiers, Timeout: timeout, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g, dir
}

type decided struct {
	req Request
	err error
}

// operatorOnHost plays the person: it waits for a request to be listed in dir, then decides it
// with each scope in turn until one is accepted.
func operatorOnHost(dir string, d Decision, scopes ...Scope) <-chan decided {
	ch := make(chan decided, 1)
	go func() {
		for range 500 {
			reqs, err := List(dir)
			if err != nil || len(reqs) > 0 {
				if err == nil {
					for _, s := range scopes {
						if _, err = Decide(dir, reqs[0].ID, d, operator, s, 0); err == nil {
							break
						}
					}
				}
				ch <- decided{reqs[0], err}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		ch <- decided{err: errors.New("no request was listed")}
	}()
	return ch
}

func ask(t *testing.T, g *Gate, ctx context.Context, canonical string) (Verdict, error) {
	t.Helper()
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	return g.Ask(ctx, "fs.write", []byte(canonical), "write .envrc \x1b[2J\u202e")
}

func quickCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func empty(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{"pending", "decisions"} {
		if ents, _ := os.ReadDir(filepath.Join(dir, d)); len(ents) > 0 {
			t.Errorf("%s holds %d files after Ask, want none", d, len(ents))
		}
	}
}

func TestAskApproveOnce(t *testing.T) {
	g, dir := openGate(t, map[string]Tier{"fs.write": Once}, 5*time.Second)
	op := operatorOnHost(dir, Approve, ScopeOnce)
	v, err := ask(t, g, nil, `{"path":".envrc"}`)
	if !v.Approved() || v.Reason() != ReasonApproved || err != nil {
		t.Fatalf("Ask: %v %s %v, want approved", v.Approved(), v.Reason(), err)
	}
	got := <-op
	sum := sha256.Sum256([]byte(`{"path":".envrc"}`))
	if got.err != nil || got.req.Digest != "sha256:"+hex.EncodeToString(sum[:]) || got.req.Component != "fs" || got.req.Tier != Once {
		t.Errorf("the operator saw %+v, %v", got.req, got.err)
	}
	if got.req.Summary != "write .envrc ?[2J?" {
		t.Errorf("summary %q: control characters reached the operator", got.req.Summary)
	}
	empty(t, dir)
	// Approve-once covers that request only: the same request again waits for a person.
	if v, _ := ask(t, g, quickCtx(t), `{"path":".envrc"}`); v.Reason() != ReasonTimeout {
		t.Errorf("second Ask: %s, want %s", v.Reason(), ReasonTimeout)
	}
}

func TestAskSessionCoversIdenticalRequests(t *testing.T) {
	g, dir := openGate(t, map[string]Tier{"fs.write": Once}, 5*time.Second)
	op := operatorOnHost(dir, Approve, ScopeSession)
	if v, err := ask(t, g, nil, "a"); v.Reason() != ReasonApproved {
		t.Fatalf("Ask: %s %v", v.Reason(), err)
	}
	if d := <-op; d.err != nil {
		t.Fatal(d.err)
	}
	if v, err := ask(t, g, quickCtx(t), "a"); v.Reason() != ReasonSession || err != nil {
		t.Errorf("identical Ask: %s %v, want %s", v.Reason(), err, ReasonSession)
	}
	if v, _ := ask(t, g, quickCtx(t), "b"); v.Reason() != ReasonTimeout {
		t.Errorf("other Ask: %s, want %s (a session covers identical requests only)", v.Reason(), ReasonTimeout)
	}
}

func TestAskEveryRefusesSession(t *testing.T) {
	g, dir := openGate(t, nil, 5*time.Second) // an action not listed is tier every
	op := operatorOnHost(dir, Approve, ScopeSession)
	if v, _ := ask(t, g, quickCtx(t), "a"); v.Reason() != ReasonTimeout {
		t.Errorf("Ask: %s, want %s", v.Reason(), ReasonTimeout)
	}
	if d := <-op; d.err == nil || !strings.Contains(d.err.Error(), "session approval is refused") {
		t.Errorf("Decide --session on tier every: %v", d.err)
	}
	op = operatorOnHost(dir, Approve, ScopeOnce)
	if v, err := ask(t, g, nil, "a"); v.Reason() != ReasonApproved {
		t.Fatalf("Ask: %s %v", v.Reason(), err)
	}
	<-op
	if v, _ := ask(t, g, quickCtx(t), "a"); v.Reason() != ReasonTimeout {
		t.Errorf("second Ask: %s, want %s", v.Reason(), ReasonTimeout)
	}
}

func TestAskDenied(t *testing.T) {
	g, dir := openGate(t, map[string]Tier{"fs.write": Once}, 5*time.Second)
	op := operatorOnHost(dir, Deny, ScopeSession)
	if v, err := ask(t, g, nil, "a"); v.Approved() || v.Reason() != ReasonDenied || err != nil {
		t.Errorf("Ask: %v %s %v, want a denial", v.Approved(), v.Reason(), err)
	}
	<-op
	empty(t, dir)
}

func TestAskTimeout(t *testing.T) {
	g, dir := openGate(t, nil, 100*time.Millisecond)
	if v, err := ask(t, g, nil, "a"); v.Approved() || v.Reason() != ReasonTimeout || err == nil {
		t.Errorf("Ask: %v %s %v, want a timeout", v.Approved(), v.Reason(), err)
	}
	empty(t, dir)
}

func TestAskAuto(t *testing.T) {
	g, dir := openGate(t, map[string]Tier{"fs.write": Auto}, 5*time.Second)
	if v, err := ask(t, g, nil, "a"); !v.Approved() || v.Reason() != ReasonAuto || err != nil {
		t.Errorf("Ask: %v %s %v, want approved_auto", v.Approved(), v.Reason(), err)
	}
	empty(t, dir)
}

// TestAskRefusesAForgedDecision: whoever can write the gate directory without the operator key
// cannot approve.
func TestAskRefusesAForgedDecision(t *testing.T) {
	g, dir := openGate(t, map[string]Tier{"fs.write": Once}, 5*time.Second)
	go func() {
		for range 500 {
			if reqs, _ := List(dir); len(reqs) > 0 {
				c := approval(reqs[0])
				c.IssuedAt, c.NotAfter = time.Now().UTC().Truncate(time.Second), time.Now().Add(time.Minute).UTC().Truncate(time.Second)
				tok, _ := sign(c, intruder)
				writeTestFile(dir, "forged", string(tok))
				os.Rename(filepath.Join(dir, "forged"), filepath.Join(dir, decisionFile(reqs[0].ID)))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if v, err := ask(t, g, nil, "a"); v.Approved() || v.Reason() != ReasonSignature {
		t.Errorf("Ask: %v %s %v, want %s", v.Approved(), v.Reason(), err, ReasonSignature)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(dir, pendingFile("AAAAAAAAAAAAAAAAAAAAAAAAAA"), "{}")
	writeTestFile(dir, usedFile, "4102444800 AAAAAAAAAAAAAAAAAAAAAAAAAA\n")
	g, err := Open(Config{Dir: dir, Component: "fs", Policy: hash('a'), Operator: pub(operator)})
	if err != nil {
		t.Fatal(err)
	}
	empty(t, dir)
	if !g.used.Has("AAAAAAAAAAAAAAAAAAAAAAAAAA") {
		t.Error("Open lost the spent approvals")
	}
	for _, cfg := range []Config{
		{Dir: dir, Component: "FS", Policy: hash('a'), Operator: pub(operator)},
		{Dir: dir, Component: "fs", Policy: "p", Operator: pub(operator)},
		{Dir: dir, Component: "fs", Policy: hash('a')},
		{Dir: filepath.Join(dir, "missing"), Component: "fs", Policy: hash('a'), Operator: pub(operator)},
	} {
		if _, err := Open(cfg); err == nil {
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

func writePending(t *testing.T, dir string, r Request) {
	t.Helper()
	b, _ := json.Marshal(r)
	os.MkdirAll(filepath.Join(dir, "decisions"), 0o755) // as Open makes it
	if err := writeTestFile(dir, pendingFile(r.ID), string(b)); err != nil {
		t.Fatal(err)
	}
}

func live(id string) Request {
	r := pending(Once)
	r.ID, r.Created, r.Expires = id, time.Now().UTC().Truncate(time.Second), time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	return r
}

func TestDecideRefuses(t *testing.T) {
	dir := t.TempDir()
	writePending(t, dir, live("AAAAAAAAAAAAAAAAAAAAAAAAAA"))
	every := live("EEEEEEEEEEEEEEEEEEEEEEEEEE")
	every.Tier = Every
	writePending(t, dir, every)
	old := live("OOOOOOOOOOOOOOOOOOOOOOOOOO")
	old.Created, old.Expires = t0, t0.Add(time.Minute)
	writePending(t, dir, old)
	if _, err := Decide(dir, "AAAAAAAAAAAAAAAAAAAAAAAAAA", Approve, operator, ScopeOnce, 0); err != nil {
		t.Fatalf("first decision: %v", err)
	}
	cases := []struct {
		name, id string
		d        Decision
		scope    Scope
		ttl      time.Duration
		want     error
		wantText string
	}{
		{"decided already", "AAAAAAAAAAAAAAAAAAAAAAAAAA", Deny, ScopeOnce, 0, ErrDecided, ""},
		{"unknown id", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ", Approve, ScopeOnce, 0, ErrUnknown, ""},
		{"a path, not an id", "../used", Approve, ScopeOnce, 0, ErrUnknown, ""},
		{"expired", "OOOOOOOOOOOOOOOOOOOOOOOOOO", Approve, ScopeOnce, 0, ErrExpired, ""},
		{"session for tier every", "EEEEEEEEEEEEEEEEEEEEEEEEEE", Approve, ScopeSession, 0, nil, "session approval is refused"},
		{"ttl over the cap", "EEEEEEEEEEEEEEEEEEEEEEEEEE", Approve, ScopeOnce, MaxTTL + 1, nil, "at most"},
		{"unknown decision", "EEEEEEEEEEEEEEEEEEEEEEEEEE", "maybe", ScopeOnce, 0, nil, "want approve or deny"},
	}
	for _, tc := range cases {
		_, err := Decide(dir, tc.id, tc.d, operator, tc.scope, tc.ttl)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantText) {
			t.Errorf("%s: %v, want %v %q", tc.name, err, tc.want, tc.wantText)
		}
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	a, b := live("AAAAAAAAAAAAAAAAAAAAAAAAAA"), live("BBBBBBBBBBBBBBBBBBBBBBBBBB")
	b.Created = a.Created.Add(-time.Second)
	expired, decidedReq := live("CCCCCCCCCCCCCCCCCCCCCCCCCC"), live("DDDDDDDDDDDDDDDDDDDDDDDDDD")
	expired.Created, expired.Expires = t0, t0.Add(time.Minute)
	bad := live("FFFFFFFFFFFFFFFFFFFFFFFFFF")
	bad.Summary = "\x1b]52;c;payload\x07"
	for _, r := range []Request{a, b, expired, decidedReq, bad} {
		writePending(t, dir, r)
	}
	writeTestFile(dir, decisionFile(decidedReq.ID), "{}")
	writeTestFile(dir, "pending/.AAAA.json.tmp", "{")
	reqs, err := List(dir)
	if err == nil || !strings.Contains(err.Error(), bad.ID) {
		t.Errorf("List error %v, want one naming %s", err, bad.ID)
	}
	if len(reqs) != 2 || reqs[0].ID != b.ID || reqs[1].ID != a.ID {
		t.Errorf("List = %+v, want %s then %s", reqs, b.ID, a.ID)
	}
	if _, err := List(filepath.Join(dir, "missing")); err == nil {
		t.Error("List of a missing folder succeeded")
	}
}

func TestCleanSummary(t *testing.T) {
	for in, want := range map[string]string{
		"write .envrc":                  "write .envrc",
		"a\nb\tc\x1b[0m":                "a?b?c?[0m",
		"x\u202ey":                      "x?y",
		"\xff":                          "?",
		strings.Repeat("é", 300):        strings.Repeat("é", MaxSummary-1) + "…",
		strings.Repeat("x", MaxSummary): strings.Repeat("x", MaxSummary),
	} {
		if got := cleanSummary(in); got != want {
			t.Errorf("cleanSummary(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOperatorKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "operator.key")
	pubKey, err := GenerateOperatorKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st, err)
	}
	if _, err := GenerateOperatorKey(path); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("second GenerateOperatorKey: %v", err)
	}
	key, err := ReadOperatorKey(path)
	if err != nil || !pub(key).Equal(pubKey) {
		t.Fatalf("ReadOperatorKey: %v", err)
	}
	for _, form := range []string{FormatPublicKey(pubKey) + "\n", pemPublic(t, key)} {
		if got, err := ParsePublicKey([]byte(form)); err != nil || !got.Equal(pubKey) {
			t.Errorf("ParsePublicKey(%q): %v", form, err)
		}
	}
	if _, err := ParsePublicKey([]byte("ed25519:AAAA")); err == nil {
		t.Error("ParsePublicKey accepted a short key")
	}
	os.Chmod(path, 0o640)
	if _, err := ReadOperatorKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("ReadOperatorKey of a group-readable key: %v", err)
	}
}

// TestNoEndpoint holds the gate's main promise in its dependencies: no HTTP server or client and
// no process to start, so there is nothing the agent could call.
func TestNoEndpoint(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || dep == "os/exec" || dep == "net/rpc" {
			t.Errorf("gate depends on %s", dep)
		}
	}
}

func pemPublic(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	_, p, err := keys.Encode(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// TestSessionReleasesWaitingRequests: identical requests that wait side by side (a client's
// parallel connections) are all answered by one session approval of any of them.
func TestSessionReleasesWaitingRequests(t *testing.T) {
	g, dir := openGate(t, map[string]Tier{"fs.write": Once}, 5*time.Second)
	results := make(chan Verdict, 3)
	for range 3 {
		go func() { v, _ := ask(t, g, nil, "same"); results <- v }()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if reqs, _ := List(dir); len(reqs) == 3 {
			if _, err := Decide(dir, reqs[1].ID, Approve, operator, ScopeSession, 0); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the three requests were not listed")
		}
	}
	reasons := map[Reason]int{}
	for range 3 {
		v := <-results
		if !v.Approved() {
			t.Errorf("a waiting identical request: %s", v.Reason())
		}
		reasons[v.Reason()]++
	}
	if reasons[ReasonApproved] != 1 || reasons[ReasonSession] != 2 {
		t.Errorf("reasons %v, want one approved and two by the session", reasons)
	}
	empty(t, dir)
}
