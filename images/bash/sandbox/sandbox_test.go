package sandbox

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be its own sandbox init. The tests import little beyond the
// package (no go-cmp): every package's init runs again in every sandbox's init, and
// BenchmarkSandbox should measure this package, not its tests' dependencies.
func TestMain(m *testing.M) {
	Init()
	os.Exit(m.Run())
}

func TestDecide(t *testing.T) {
	both := []string{"analyse", "build"}
	tests := []struct {
		name    string
		p       Profile
		allowed []string
		proxy   string
		want    Decision
	}{
		{"analyse allowed", Analyse, both, "", Decision{Allow: true}},
		{"build allowed with a proxy", Build, both, "net:3128", Decision{Allow: true}},
		{"build without a proxy", Build, both, "", Decision{Reason: reasonNoProxy}},
		{"build not in the policy", Build, []string{"analyse"}, "net:3128",
			Decision{Reason: `profile "build" is not allowed by the policy (business.bash.profiles: analyse)`}},
		{"analyse not in the policy", Analyse, []string{"build"}, "net:3128",
			Decision{Reason: `profile "analyse" is not allowed by the policy (business.bash.profiles: build)`}},
		{"empty policy", Analyse, nil, "", Decision{Reason: `profile "analyse" is not allowed by the policy (business.bash.profiles: )`}},
		{"admin asks a person", Admin, []string{"analyse", "admin"}, "net:3128", Decision{Ask: true, Reason: ReasonApproval}},
		{"admin not in the policy", Admin, both, "net:3128",
			Decision{Reason: `profile "admin" is not allowed by the policy (business.bash.profiles: analyse, build)`}},
		{"admin without a proxy", Admin, []string{"admin"}, "", Decision{Reason: reasonNoProxy}},
		{"unknown", "root", []string{"root"}, "net:3128", Decision{Reason: `unknown profile "root"`}},
		{"empty name", "", both, "net:3128", Decision{Reason: `unknown profile ""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.p, tt.allowed, tt.proxy); got != tt.want {
				t.Errorf("Decide(%q, %q, %q) = %+v, want %+v", tt.p, tt.allowed, tt.proxy, got, tt.want)
			}
		})
	}
	if (Decision{}).Allow || (Decision{}).Ask {
		t.Error("the zero Decision allows or asks")
	}
}

func TestNormalize(t *testing.T) {
	ok := Spec{Command: "true", Profile: Analyse}
	with := func(f func(*Spec)) Spec { s := ok; f(&s); return s }
	tests := []struct {
		name    string
		spec    Spec
		wantErr string // a substring; "" for success
	}{
		{"defaults", ok, ""},
		{"build with a proxy", with(func(s *Spec) { s.Profile, s.ProxyAddr = Build, "net:3128" }), ""},
		{"build without a proxy", with(func(s *Spec) { s.Profile = Build }), "proxy address"},
		{"build with a bad port", with(func(s *Spec) { s.Profile, s.ProxyAddr = Build, "net:http" }), "bad port"},
		{"build with port 0", with(func(s *Spec) { s.Profile, s.ProxyAddr = Build, "net:0" }), "bad port"},
		{"build without a host", with(func(s *Spec) { s.Profile, s.ProxyAddr = Build, ":3128" }), "no host"},
		{"admin with a proxy", with(func(s *Spec) { s.Profile, s.ProxyAddr = Admin, "net:3128" }), ""},
		{"admin without a proxy", with(func(s *Spec) { s.Profile = Admin }), "proxy address"},
		{"hide a folder", with(func(s *Spec) { s.Hide = []string{"/var/lib/sharness/gate", "/var/log/sharness"} }), ""},
		{"hide a relative path", with(func(s *Spec) { s.Hide = []string{"gate"} }), "hide"},
		{"hide an unclean path", with(func(s *Spec) { s.Hide = []string{"/var/lib/../gate"} }), "hide"},
		{"hide /", with(func(s *Spec) { s.Hide = []string{"/"} }), "hide"},
		{"hide the workspace", with(func(s *Spec) { s.Hide = []string{"/workspace"} }), "hide"},
		{"hide inside the workspace", with(func(s *Spec) { s.Hide = []string{"/workspace/.git"} }), "hide"},
		{"hide above the workspace", with(func(s *Spec) { s.Hide = []string{"/var/lib"}; s.Workspace = "/var/lib/ws" }), "hide"},
		{"hide beside the workspace", with(func(s *Spec) { s.Hide = []string{"/workspace2"} }), ""},
		{"unknown profile", with(func(s *Spec) { s.Profile = "root" }), "unknown profile"},
		{"empty command", with(func(s *Spec) { s.Command = "" }), "command"},
		{"NUL in command", with(func(s *Spec) { s.Command = "echo \x00" }), "command"},
		{"long command", with(func(s *Spec) { s.Command = strings.Repeat("x", MaxCommand+1) }), "command"},
		{"longest command", with(func(s *Spec) { s.Command = strings.Repeat("x", MaxCommand) }), ""},
		{"negative timeout", with(func(s *Spec) { s.Timeout = -time.Second }), "timeout"},
		{"negative limit", with(func(s *Spec) { s.Limits.TmpSize = -1 }), "limits"},
		{"relative workspace", with(func(s *Spec) { s.Workspace = "ws" }), "workspace"},
		{"unclean workspace", with(func(s *Spec) { s.Workspace = "/ws/../etc" }), "workspace"},
		{"root workspace", with(func(s *Spec) { s.Workspace = "/" }), "workspace"},
		{"workspace under /tmp", with(func(s *Spec) { s.Workspace = "/tmp/ws" }), "replaces"},
		{"workspace /run", with(func(s *Spec) { s.Workspace = "/run" }), "replaces"},
		{"workspace beside /tmp", with(func(s *Spec) { s.Workspace = "/tmpfoo" }), ""},
		{"cwd escapes", with(func(s *Spec) { s.Cwd = "../etc" }), "cwd"},
		{"cwd absolute", with(func(s *Spec) { s.Cwd = "/etc" }), "cwd"},
		{"cwd below", with(func(s *Spec) { s.Cwd = "src/pkg" }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.normalize()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("normalize: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("normalize error = %v, want one containing %q", err, tt.wantErr)
			case err == nil && (got.Workspace == "" || got.Timeout == 0 || got.Limits != DefaultLimits):
				t.Errorf("defaults not filled in: %+v", got)
			}
		})
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := Limits{PIDs: 10, Output: 5}.withDefaults()
	want := DefaultLimits
	want.PIDs, want.Output = 10, 5
	if got != want {
		t.Errorf("withDefaults = %+v, want %+v", got, want)
	}
}

func TestCwdValid(t *testing.T) {
	tests := []struct {
		cwd  string
		want bool
	}{
		{"", true}, {"src", true}, {"src/pkg", true}, {".git", true}, {"a..b", true},
		{".", false}, {"..", false}, {"../etc", false}, {"a/../b", false}, {"a/..", false},
		{"/etc", false}, {"a/", false}, {"a//b", false}, {"./a", false}, {"a\x00b", false},
		{strings.Repeat("a", 4097), false},
	}
	for _, tt := range tests {
		if got := CwdValid(tt.cwd); got != tt.want {
			t.Errorf("CwdValid(%q) = %v, want %v", tt.cwd, got, tt.want)
		}
	}
}

func TestPlan(t *testing.T) {
	refused := errors.New("operation not permitted")
	tests := []struct {
		name       string
		f          Features
		bestEffort bool
		wantErr    string
		wantDeg    int
		want       Sandbox
	}{
		{"everything", Features{Landlock: 7}, false, "", 0, Sandbox{landlock: 7}},
		{"the minimum", Features{Landlock: MinLandlockABI}, false, "", 0, Sandbox{landlock: MinLandlockABI}},
		{"newer than the library", Features{Landlock: 99}, false, "", 0, Sandbox{landlock: 99}},
		{"no namespaces", Features{Namespaces: refused, Landlock: 7}, false, "namespaces", 0, Sandbox{}},
		{"no namespaces, best effort", Features{Namespaces: refused, Landlock: 7}, true, "namespaces", 0, Sandbox{}},
		{"no proc", Features{ProcMount: refused, Landlock: 7}, false, "fresh /proc", 0, Sandbox{}},
		{"no proc, best effort", Features{ProcMount: refused, Landlock: 7}, true, "", 1, Sandbox{landlock: 7, keepProc: true}},
		{"old Landlock", Features{Landlock: 5}, false, "Landlock ABI 5 < 6", 0, Sandbox{}},
		{"old Landlock, best effort", Features{Landlock: 3}, true, "", 3, Sandbox{landlock: 3}},
		{"no Landlock, best effort", Features{}, true, "", 4, Sandbox{}},
		{"nothing but namespaces, best effort", Features{ProcMount: refused, Root: true}, true, "", 6, Sandbox{keepProc: true}},
		{"root", Features{Landlock: 7, Root: true}, false, "RLIMIT_NPROC", 0, Sandbox{}},
		{"root, best effort", Features{Landlock: 7, Root: true}, true, "", 1, Sandbox{landlock: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, deg, err := Plan(tt.f, tt.bestEffort)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Plan error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if len(deg) != tt.wantDeg {
				t.Errorf("degradations = %q, want %d", deg, tt.wantDeg)
			}
			if *s != tt.want {
				t.Errorf("Plan = %+v, want %+v", *s, tt.want)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		in      Result
		want    Result
		wantErr string
	}{
		{"exit 0", "exit 0", Result{}, Result{}, ""},
		{"exit 3", "exit 3", Result{ExitCode: 3}, Result{ExitCode: 3}, ""},
		{"bash killed", "signal 9", Result{ExitCode: 137}, Result{ExitCode: 137, Signal: "SIGKILL"}, ""},
		{"bash terminated", "signal 15", Result{}, Result{ExitCode: 143, Signal: "SIGTERM"}, ""},
		{"timed out", "", Result{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, Result{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}, ""},
		{"killed during setup", "error mount", Result{ExitCode: 137, Signal: "SIGKILL"}, Result{ExitCode: 137, Signal: "SIGKILL"}, ""},
		{"setup failed", "error mount proc on /proc: operation not permitted", Result{ExitCode: 125}, Result{ExitCode: 125}, "sandbox setup: mount proc"},
		{"no status", "", Result{ExitCode: 2}, Result{ExitCode: 2}, "without a status"},
		{"garbage", "exit x", Result{ExitCode: 2}, Result{ExitCode: 2}, "without a status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			err := outcome(tt.status, &got)
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("outcome error = %v, want %q", err, tt.wantErr)
			}
			if got.ExitCode != tt.want.ExitCode || got.Signal != tt.want.Signal || got.TimedOut != tt.want.TimedOut {
				t.Errorf("outcome = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCapture(t *testing.T) {
	c := &capture{keep: 5}
	for _, s := range []string{"ab", "cde", "fgh", ""} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if string(c.buf) != "abcde" || c.total != 8 {
		t.Errorf("capture kept %q of %d, want \"abcde\" of 8", c.buf, c.total)
	}
}

func TestMountPoint(t *testing.T) {
	tests := []struct {
		line, want string
		ok         bool
	}{
		{"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw", "/mnt2", true},
		{`41 30 0:40 / /workspace/with\040space rw - tmpfs tmpfs rw`, "/workspace/with space", true},
		{`41 30 0:40 / /a\134b\012c rw - tmpfs tmpfs rw`, "/a\\b\nc", true},
		{`41 30 0:40 / /bad\09 rw`, `/bad\09`, true},
		{`41 30 0:40 / /end\04`, `/end\04`, true},
		{"1 2 3 4", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := mountPoint(tt.line)
		if got != tt.want || ok != tt.ok {
			t.Errorf("mountPoint(%q) = %q, %v, want %q, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzMountPoint: mount points are named by whoever made the folders, and the parser must not
// panic on any line.
func FuzzMountPoint(f *testing.F) {
	for _, s := range []string{"36 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root rw", `1 2 3 / /a\040b rw`, `1 2 3 / /\`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, ok := mountPoint(line)
		if ok && len(p) > len(line) {
			t.Errorf("mountPoint(%q) = %q: longer than its line", line, p)
		}
	})
}
