package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gateDir is compile.GateDir, bash's approval gate folder (the test does not link the compiler:
// every sandbox of these tests starts this binary afresh).
const gateDir = "/var/lib/sharness/gate"

func adminSpec() Spec {
	return Spec{Command: "apt-get install -y jq", Profile: Admin, Timeout: 60 * time.Second, Cwd: "src",
		Workspace: "/workspace", ProxyAddr: "net:3128", Hide: []string{gateDir}}
}

// TestAdminRequestBindsTheRun: every field Run uses changes the canonical bytes (an approval of
// one command never covers another), the approval's id does not, and defaults are filled in
// first (the same run has one encoding).
func TestAdminRequestBindsTheRun(t *testing.T) {
	base, summary, err := AdminRequest(adminSpec())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"profile":"admin","command":"apt-get install -y jq","timeout_ms":60000,"cwd":"src","workspace":"/workspace",` +
		`"proxy":"net:3128","limits":{"PIDs":256,"AddressSpace":4294967296,"CPUSeconds":300,"FileSize":536870912,"TmpSize":268435456,"Output":1048576},` +
		`"hide":["/var/lib/sharness/gate"]}`
	if string(base) != want {
		t.Errorf("canonical\n%s\nwant\n%s", base, want)
	}
	if summary != `admin in "src": "apt-get install -y jq"` {
		t.Errorf("summary %q", summary)
	}
	for name, change := range map[string]func(*Spec){
		"command":   func(s *Spec) { s.Command += " curl" },
		"timeout":   func(s *Spec) { s.Timeout = 61 * time.Second },
		"cwd":       func(s *Spec) { s.Cwd = "" },
		"workspace": func(s *Spec) { s.Workspace = "/ws" },
		"proxy":     func(s *Spec) { s.ProxyAddr = "net2:3128" },
		"limits":    func(s *Spec) { s.Limits.PIDs = 10 },
		"hide":      func(s *Spec) { s.Hide = nil },
	} {
		s := adminSpec()
		change(&s)
		if got, _, err := AdminRequest(s); err != nil || bytes.Equal(got, base) {
			t.Errorf("%s changed, canonical bytes the same (%v)", name, err)
		}
	}
	s := adminSpec()
	s.Approval = "Q2ZK7C4TXB3JH6N5M2WLRD7A4E"
	if got, _, _ := AdminRequest(s); !bytes.Equal(got, base) {
		t.Error("the approval's id changed the bytes it approves")
	}
	s = adminSpec()
	s.Limits = DefaultLimits
	if got, _, _ := AdminRequest(s); !bytes.Equal(got, base) {
		t.Error("explicit default limits encode differently from none")
	}
}

func TestAdminRequestRefuses(t *testing.T) {
	for name, change := range map[string]func(*Spec){
		"build":            func(s *Spec) { s.Profile = Build },
		"no proxy":         func(s *Spec) { s.ProxyAddr = "" },
		"empty command":    func(s *Spec) { s.Command = "" },
		"invalid UTF-8":    func(s *Spec) { s.Command = "echo \xff" },
		"invalid cwd":      func(s *Spec) { s.Cwd = "../etc" },
		"cwd not UTF-8":    func(s *Spec) { s.Cwd = "src\xfe" },
		"hide a workspace": func(s *Spec) { s.Hide = []string{"/workspace"} },
	} {
		s := adminSpec()
		change(&s)
		if _, _, err := AdminRequest(s); err == nil {
			t.Errorf("%s: AdminRequest accepted %+v", name, s)
		}
	}
}

func TestAdminSummary(t *testing.T) {
	tests := []struct {
		cmd, cwd, want string
	}{
		{"id", "", `admin: "id"`},
		// Two commands must not read like one: a newline is not a space.
		{"make\n\tinstall   PREFIX=/usr", "", `admin: "make\n\tinstall   PREFIX=/usr"`},
		{`echo a\nb`, "", `admin: "echo a\\nb"`},
		{"ls", "a/b", `admin in "a/b": "ls"`},
		{"echo \u202egnp.exe", "", `admin: "echo \u202egnp.exe"`}, // a bidirectional override shows as its escape
		{"echo é", "", `admin: "echo é"`},
	}
	for _, tt := range tests {
		if got := adminSummary(Spec{Command: tt.cmd, Cwd: tt.cwd}); got != tt.want {
			t.Errorf("adminSummary(%q, %q) = %q, want %q", tt.cmd, tt.cwd, got, tt.want)
		}
	}
}

// TestAdminRequestShowsTheWholeCommand: a command or working folder too long to show whole is
// refused, never shortened; the longest accepted ones fit the gate's 200-rune summary uncut.
func TestAdminRequestShowsTheWholeCommand(t *testing.T) {
	s := adminSpec()
	s.Command = strings.Repeat("a", AdminShown-2) // quoted: exactly AdminShown
	s.Cwd = strings.Repeat("d", adminCwdShown-2)
	_, summary, err := AdminRequest(s)
	if err != nil {
		t.Fatalf("AdminRequest of the longest command and folder: %v", err)
	}
	if n := len([]rune(summary)); n > 200 || !strings.Contains(summary, s.Command) || !strings.Contains(summary, s.Cwd) {
		t.Errorf("summary %q (%d runes): want the whole command and folder within 200", summary, n)
	}
	for name, change := range map[string]func(*Spec){
		"long command":         func(s *Spec) { s.Command += "a" },
		"escapes make it long": func(s *Spec) { s.Command = s.Command[:len(s.Command)-1] + "\n" },
		"long folder":          func(s *Spec) { s.Cwd += "d" },
	} {
		s := s
		change(&s)
		if _, _, err := AdminRequest(s); err == nil || !strings.Contains(err.Error(), "as the person would read it") {
			t.Errorf("%s: AdminRequest gave %v, want a refusal saying why", name, err)
		}
	}
}

// TestRunRefusesAdminWithoutApproval: the sandbox never runs an admin command nobody approved,
// whatever its caller forgot.
func TestRunRefusesAdminWithoutApproval(t *testing.T) {
	s := adminSpec()
	if _, err := (&Sandbox{}).Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "approval_required") {
		t.Errorf("Run(admin, no approval) = %v, want approval_required", err)
	}
}

// TestLandlockLeavesOutTheServersFolders: no profile's Landlock rules reach bash's gate folder
// or its audit folder: no rule's path is either of them or above them.
func TestLandlockLeavesOutTheServersFolders(t *testing.T) {
	for _, p := range []Profile{Analyse, Build} {
		_, rules := landlockRules(MinLandlockABI, p, "/workspace", 3128)
		var paths []string
		for _, r := range rules {
			if _, list, ok := strings.Cut(fmt.Sprint(r), "paths ["); ok {
				paths = append(paths, strings.Fields(strings.TrimSuffix(list, "]"))...)
			}
		}
		if len(paths) < 5 {
			t.Fatalf("%s: read %d paths from the rules %v", p, len(paths), rules)
		}
		for _, dir := range []string{gateDir, "/var/log/sharness"} {
			for _, path := range paths {
				if dir == path || strings.HasPrefix(dir, path+"/") {
					t.Errorf("%s: the rule on %s reaches %s", p, path, dir)
				}
			}
		}
	}
}

// TestHide runs real sandboxes over a stand-in for bash's gate folder (outside /tmp, which the
// sandbox replaces), with Landlock and, as best effort would, without it: the folder is empty
// and read-only inside the sandbox, in every profile, and untouched outside.
func TestHide(t *testing.T) {
	gate := workspace(t) // a fresh folder under /var/tmp
	if err := os.WriteFile(filepath.Join(gate, "used"), []byte("secret-ish\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, px := workspace(t), proxy(t)
	strict := realSandbox(t)
	for _, sb := range []struct {
		name string
		s    *Sandbox
	}{{"landlock", strict}, {"no landlock", &Sandbox{keepProc: strict.keepProc}}} {
		for _, p := range []Profile{Analyse, Build, Admin} {
			spec := Spec{Profile: p, Workspace: ws, ProxyAddr: px, Hide: []string{gate, "/var/lib/sharness-missing"}, Approval: "TEST",
				Command: "stat -f -c %T " + gate + "; ls -A " + gate + "; cat " + gate + "/used; touch " + gate + "/x"}
			res, err := sb.s.Run(context.Background(), spec)
			if err != nil {
				t.Fatalf("%s %s: %v", sb.name, p, err)
			}
			out, errOut := string(res.Stdout), string(res.Stderr)
			if out != "tmpfs\n" || strings.Contains(out+errOut, "secret-ish") || res.ExitCode == 0 {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want an empty read-only tmpfs", sb.name, p, res.ExitCode, out, errOut)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(gate, "used")); err != nil || string(b) != "secret-ish\n" {
		t.Errorf("the folder outside the sandbox: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(gate, "x")); err == nil {
		t.Error("a sandbox wrote the hidden folder")
	}
}

// TestAdminRunsAsBuild: an approved admin command has exactly build's rights.
func TestAdminRunsAsBuild(t *testing.T) {
	ws, px, other := workspace(t), proxy(t), proxy(t)
	for _, tt := range []struct {
		command  string
		wantExit int
	}{
		{"echo admin > made && cat made", 0},
		{"exec 3<>/dev/tcp/" + strings.Replace(px, ":", "/", 1) + " && cat <&3", 0},
		{"exec 3<>/dev/tcp/" + strings.Replace(other, ":", "/", 1), 1},
		{"env | grep -c '^HTTPS_PROXY=http://" + px + "$'", 0},
		{"echo x > /usr/local/x", 1},
		{"unshare -Ur true", 1},
	} {
		res := run(t, Spec{Command: tt.command, Profile: Admin, Workspace: ws, ProxyAddr: px, Approval: "TEST"})
		if res.ExitCode != tt.wantExit {
			t.Errorf("%q: exit %d, want %d; stderr %q", tt.command, res.ExitCode, tt.wantExit, res.Stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made")); err != nil || string(b) != "admin\n" {
		t.Errorf("the workspace after admin: %q, %v", b, err)
	}
}
