package guard

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/internal/secretfilter"
)

// The default policy's lists (policies/default, L2-workspace and L3-fs).
var (
	defaultProtected = []string{".bashrc", ".claude/", ".envrc", ".git/config", ".git/hooks/", ".idea/", ".profile", ".vscode/", ".zshrc"}
	defaultAsk       = []string{".git/hooks/", ".git/config", ".envrc", ".bashrc", ".zshrc", ".profile", ".claude/settings.json", ".claude/settings.local.json", ".vscode/tasks.json"}
)

func testRules(t testing.TB) *Rules {
	t.Helper()
	r, err := Compile(Policy{Protected: defaultProtected, Ask: defaultAsk, MaxFileSize: 1 << 10, MaxEntries: 20})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testFilter(t testing.TB) *secretfilter.Filter {
	t.Helper()
	f, err := secretfilter.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// pemKey is a fresh EC private key, PEM-encoded: made at run time so no scanner flags the source.
func pemKey(t testing.TB) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// pathCases are the path decisions, shared with the fuzz seeds.
var pathCases = []struct {
	name, path string
	want       Reason // "" accepted
	root       bool
}{
	{"file inside a protected folder", ".claude/commands/hello.md", "", false},
	{"protected root file", ".envrc", "", true},
	{"protected root file in a folder", ".git/config", "", true},
	{"protected folder itself", ".claude", "", true},
	{"protected folder with slash", ".claude/", "", true},
	{"nested protected folder", ".git/hooks/pre-commit", "", false},
	{"empty", "", ReasonBadPath, false},
	{"absolute", "/etc/passwd", ReasonBadPath, false},
	{"absolute inside", "/workspace/.claude/x", ReasonBadPath, false},
	{"dot dot", ".claude/../src/main.go", ReasonBadPath, false},
	{"dot dot at start", "../.claude/x", ReasonBadPath, false},
	{"dot dot alone", "..", ReasonBadPath, false},
	{"dot", ".", ReasonBadPath, false},
	{"dot component", ".claude/./x", ReasonBadPath, false},
	{"empty component", ".claude//x", ReasonBadPath, false},
	{"two trailing slashes", ".claude//", ReasonBadPath, false},
	{"nul", ".claude/x\x00y", ReasonBadPath, false},
	{"newline", ".claude/x\ny", ReasonBadPath, false},
	{"invalid utf-8", ".claude/\xff", ReasonBadPath, false},
	{"too long", ".claude/" + strings.Repeat("a/", 600), ReasonBadPath, false},
	{"too deep", ".claude/" + strings.Repeat("a/", MaxDepth) + "x", ReasonBadPath, false},
	{"long component", ".claude/" + strings.Repeat("a", 256), ReasonBadPath, false},
	{"not protected", "src/main.go", ReasonNotProtected, false},
	{"workspace ancestor of a protected folder", ".git", ReasonNotProtected, false},
	{"under a protected file", ".envrc/x", ReasonNotProtected, false},
	{"prefix but not a folder of it", ".claudex/y", ReasonNotProtected, false},
	{"case differs", ".CLAUDE/x", ReasonNotProtected, false},
}

func TestResolve(t *testing.T) {
	r := testRules(t)
	for _, c := range pathCases {
		t.Run(c.name, func(t *testing.T) {
			got, ref := r.Resolve(c.path)
			if reason(ref) != c.want {
				t.Fatalf("Resolve(%q) = %v, want reason %q", c.path, ref, c.want)
			}
			if ref == nil && got.isRoot != c.root {
				t.Errorf("Resolve(%q).isRoot = %v, want %v", c.path, got.isRoot, c.root)
			}
		})
	}
}

func reason(ref *Refusal) Reason {
	if ref == nil {
		return ""
	}
	return ref.Reason
}

// verdict is the refusal of a change by the rules as write, remove and rename make it with
// nothing approved: the rules' own, else approval_required for a change to an ask path (granted).
func verdict(ref *Refusal, ts ...Target) *Refusal {
	if ask := askPath(ts...); ref == nil && ask != "" {
		return granted(ask, nil, nil)
	}
	return ref
}

// TestCheckWrite: the rules of a write (checkWrite, then the ask rule).
func TestCheckWrite(t *testing.T) {
	r, f := testRules(t), testFilter(t)
	key := pemKey(t)
	for _, c := range []struct {
		name, path, content, mode string
		want                      Reason
		perm                      uint32
	}{
		{"ok", ".claude/commands/hello.md", "hello", "", "", 0},
		{"ok with mode", ".vscode/settings.json", "{}", "0644", "", 0o644},
		{"mode without 0", ".vscode/settings.json", "{}", "600", "", 0o600},
		{"exec mode asked (stripped later)", ".claude/commands/hello.md", "x", "0755", "", 0o755},
		{"root file", ".idea/x", "x", "", "", 0},
		{"bad path", ".claude/../x", "x", "", ReasonBadPath, 0},
		{"not protected", "src/main.go", "x", "", ReasonNotProtected, 0},
		{"folder itself", ".claude", "x", "", ReasonWrongType, 0},
		{"trailing slash", ".claude/x/", "x", "", ReasonWrongType, 0},
		{"ask root file", ".envrc", "x", "", ReasonApproval, 0},
		{"ask folder entry", ".git/hooks/pre-commit", "x", "", ReasonApproval, 0},
		{"ask file in a folder", ".claude/settings.json", "x", "", ReasonApproval, 0},
		{"too large", ".claude/big", strings.Repeat("a", 1025), "", ReasonTooLarge, 0},
		{"at the cap", ".claude/big", strings.Repeat("a", 1024), "", "", 0},
		{"setuid", ".claude/x", "x", "4755", ReasonMode, 0},
		{"mode not octal", ".claude/x", "x", "0o644", ReasonMode, 0},
		{"mode decimal", ".claude/x", "x", "420", ReasonMode, 0},
		{"mode too short", ".claude/x", "x", "64", ReasonMode, 0},
		{"owner cannot write", ".claude/x", "x", "0444", ReasonMode, 0},
		{"secret", ".claude/key.pem", string(key), "", ReasonSecret, 0},
		{"secret before ask (nobody is asked about a change refused anyway)", ".envrc", string(key), "", ReasonSecret, 0},
		{"mode before ask", ".envrc", "x", "4755", ReasonMode, 0},
		{"size before ask", ".git/hooks/big", strings.Repeat("a", 1025), "", ReasonTooLarge, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg, perm, ref := r.checkWrite(c.path, []byte(c.content), c.mode, f)
			if ref = verdict(ref, tg); reason(ref) != c.want {
				t.Fatalf("checkWrite(%q) = %v, want reason %q", c.path, ref, c.want)
			}
			if ref == nil && perm != c.perm {
				t.Errorf("perm = %o, want %o", perm, c.perm)
			}
			if ref != nil && strings.Contains(ref.Message, "BEGIN") {
				t.Errorf("the message holds content: %s", ref.Message)
			}
		})
	}
}

func TestSecretNamesRule(t *testing.T) {
	r, f := testRules(t), testFilter(t)
	ref := r.CheckContent(".claude/k", pemKey(t), f)
	if reason(ref) != ReasonSecret || !strings.Contains(ref.Message, "private-key") {
		t.Fatalf("got %v, want a secret refusal naming rule private-key", ref)
	}
}

func TestMode(t *testing.T) {
	for _, c := range []struct {
		name            string
		exec            bool
		asked, existing uint32
		exists          bool
		want            uint32
		stripped        bool
	}{
		{"new default", false, 0, 0, false, 0o644, false},
		{"keep existing", false, 0, 0o100600, true, 0o600, false},
		{"existing exec stripped", false, 0, 0o100755, true, 0o644, true},
		{"asked exec stripped", false, 0o755, 0, false, 0o644, true},
		{"asked exec allowed", true, 0o755, 0, false, 0o755, false},
		{"asked wins over existing", false, 0o600, 0o644, true, 0o600, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := Compile(Policy{ExecBits: c.exec})
			got, stripped := r.Mode(c.asked, c.existing, c.exists)
			if got != c.want || stripped != c.stripped {
				t.Errorf("Mode = %o, %v; want %o, %v", got, stripped, c.want, c.stripped)
			}
		})
	}
}

// TestCheckDelete: the rules of a delete (checkDelete, then the ask rule).
func TestCheckDelete(t *testing.T) {
	r := testRules(t)
	for _, c := range []struct {
		name, path string
		want       Reason
	}{
		{"entry", ".claude/commands/hello.md", ""},
		{"folder entry", ".claude/commands/", ""},
		{"protected folder", ".claude/", ReasonProtectedRoot},
		{"protected folder without slash", ".claude", ReasonProtectedRoot},
		{"protected file", ".git/config", ReasonProtectedRoot},
		{"nested protected folder", ".git/hooks", ReasonProtectedRoot},
		{"ask", ".git/hooks/pre-commit", ReasonApproval},
		{"ask file", ".vscode/tasks.json", ReasonApproval},
		{"not protected", ".git", ReasonNotProtected},
		{"bad", "..", ReasonBadPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			if tg, ref := r.checkDelete(c.path); reason(verdict(ref, tg)) != c.want {
				t.Errorf("checkDelete(%q) = %v, want reason %q", c.path, verdict(ref, tg), c.want)
			}
		})
	}
}

// TestCheckRename: the rules of a rename (checkRename, then the ask rule on either path).
func TestCheckRename(t *testing.T) {
	r, err := Compile(Policy{Protected: []string{".claude/", ".claude/pinned.md", ".vscode/", ".envrc"}, Ask: []string{".claude/agents/deploy.md"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, from, to string
		want           Reason
	}{
		{"within a folder", ".claude/a", ".claude/b", ""},
		{"across folders", ".claude/a", ".vscode/a", ""},
		{"into a new folder", ".claude/a", ".claude/x/y/a", ""},
		{"from a root", ".envrc", ".claude/envrc", ReasonProtectedRoot},
		{"to a root", ".claude/a", ".envrc", ReasonProtectedRoot},
		{"folder root", ".claude", ".vscode/c", ReasonProtectedRoot},
		{"protected file in a folder", ".claude/pinned.md", ".claude/b", ReasonProtectedRoot},
		{"over a protected file", ".claude/b", ".claude/pinned.md", ReasonProtectedRoot},
		{"to itself", ".claude/a", ".claude/a", ReasonBadPath},
		{"into itself", ".claude/a", ".claude/a/b", ReasonBadPath},
		{"ask", ".claude/agents/deploy.md", ".claude/x", ReasonApproval},
		{"folder holding an ask path", ".claude/agents", ".claude/x", ReasonApproval},
		{"onto an ask path", ".claude/x", ".claude/agents/deploy.md", ReasonApproval},
		{"out of protection", ".claude/a", "src/a", ReasonNotProtected},
		{"into protection", "src/a", ".claude/a", ReasonNotProtected},
		{"dot dot", ".claude/a", ".claude/../a", ReasonBadPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			if a, b, ref := r.checkRename(c.from, c.to); reason(verdict(ref, a, b)) != c.want {
				t.Errorf("checkRename(%q, %q) = %v, want reason %q", c.from, c.to, verdict(ref, a, b), c.want)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"default", Policy{Protected: defaultProtected, Ask: defaultAsk}, true},
		{"empty", Policy{}, true},
		{"protected not clean", Policy{Protected: []string{"a/../b"}}, false},
		{"protected absolute", Policy{Protected: []string{"/etc/"}}, false},
		{"ask not protected", Policy{Protected: []string{".claude/"}, Ask: []string{"src/"}}, false},
		{"ask folder is a protected file", Policy{Protected: []string{".envrc"}, Ask: []string{".envrc/"}}, false},
		{"ask file is a protected folder", Policy{Protected: []string{".claude/"}, Ask: []string{".claude"}}, false},
		{"ask inside a folder", Policy{Protected: []string{".claude/"}, Ask: []string{".claude/agents/"}}, true},
		{"negative size", Policy{MaxFileSize: -1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Compile(c.p)
			if (err == nil) != c.ok {
				t.Fatalf("Compile = %v, want ok %v", err, c.ok)
			}
			if err == nil && r.MaxFileSize() == 0 {
				t.Error("MaxFileSize is 0, want the default")
			}
		})
	}
}

func TestZeroRulesRefuseEverything(t *testing.T) {
	var r Rules
	for _, c := range pathCases {
		if _, ref := r.Resolve(c.path); ref == nil {
			t.Errorf("zero Rules accepted %q", c.path)
		}
	}
}
