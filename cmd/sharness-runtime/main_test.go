package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/host/shim/runc"
)

// The test binary plays every part, chosen by the name it runs under: sharness-runtime (main),
// and fake-runc, runc (on PATH) and fake-check, which print who they are and their argv.
const (
	shimName  = "sharness-runtime"
	runcName  = "fake-runc"
	checkName = "fake-check"
	envChild  = "SHARNESS_RUNTIME_TEST_CHILD"
)

var binDir string

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case shimName:
		main()
	case runcName, checkName, "runc":
		os.Stdout.WriteString(filepath.Base(os.Args[0]) + " " + strings.Join(os.Args[1:], " "))
		os.Exit(0)
	}
	if os.Getenv(envChild) != "" { // a part this test did not name: never the tests again
		os.Stderr.WriteString("unexpected program " + os.Args[0] + "\n")
		os.Exit(3)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sharness-runtime-test")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	// Copies, not links: the shim refuses a runc or a check that is the same file as itself.
	for _, name := range []string{runcName, checkName} {
		if err := copyFile(self, filepath.Join(dir, name)); err != nil {
			panic(err)
		}
	}
	if err := os.Symlink(self, filepath.Join(dir, shimName)); err != nil {
		panic(err)
	}
	binDir = dir
	return m.Run()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// containerd's shim (go-runc) puts these before every command.
var globals = []string{"--root", "/var/run/docker/runtime-runc/moby", "--log", "/run/x/log.json", "--log-format", "json"}

func TestRoute(t *testing.T) {
	g := func(a ...string) []string { return append(append([]string{}, globals...), a...) }
	tests := []struct {
		name     string
		args     []string
		wantName string
		wantPass bool
	}{
		{"start", g("start", "abc"), "start", true},
		{"delete", g("delete", "abc"), "delete", true},
		{"delete --force", g("delete", "--force", "abc"), "delete", true},
		{"state", g("state", "abc"), "state", true},
		{"kill", g("kill", "abc", "9"), "kill", true},
		{"systemd and debug", append([]string{"--systemd-cgroup", "--debug"}, g("events", "--stats", "abc")...), "events", true},
		{"no globals", []string{"ps", "abc"}, "ps", true},
		{"create", g("create", "--bundle", "/b", "abc"), "create", false},
		{"run", g("run", "abc"), "run", false},
		{"restore", g("restore", "abc"), "restore", false},
		{"exec", g("exec", "--process", "/p", "abc"), "exec", false},
		{"update", g("update", "-r", "-", "abc"), "update", false},
		{"checkpoint: not listed", g("checkpoint", "abc"), "checkpoint", false},
		{"a value that looks like a command", []string{"--root", "start", "create", "abc"}, "create", false},
		{"a value that looks like a flag", []string{"--log", "--debug", "start", "abc"}, "start", true},
		{"a flag with =", []string{"--root=/r", "start", "abc"}, "", false},
		{"a single-dash flag", []string{"-root", "/r", "start", "abc"}, "", false},
		{"an unknown flag", []string{"--criu", "/c", "start", "abc"}, "", false},
		{"a boolean with a value", []string{"--debug=false", "start", "abc"}, "", false},
		{"help", []string{"--help", "start"}, "", false},
		{"version", []string{"-v"}, "", false},
		{"--", []string{"--", "start", "abc"}, "", false},
		{"-", []string{"-", "start"}, "", false},
		{"a missing value", []string{"--root"}, "", false},
		{"an empty command", []string{""}, "", false},
		{"nothing", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, pass := Route(tt.args)
			if pass != tt.wantPass || (pass && name != tt.wantName) || (!pass && tt.wantName != "" && name != tt.wantName) {
				t.Errorf("Route(%q) = %q, %v; want %q, %v", tt.args, name, pass, tt.wantName, tt.wantPass)
			}
			agrees(t, tt.args)
		})
	}
}

// agrees holds Route to runc's grammar: what it passes through, host/shim/runc.Parse reads as
// the same command, without error, and as one the shim does not police.
func agrees(t *testing.T, args []string) {
	t.Helper()
	name, pass := Route(args)
	if !pass {
		return
	}
	cmd, err := runc.Parse(args)
	switch {
	case err != nil:
		t.Errorf("Route(%q) passes %q through; runc.Parse: %v", args, name, err)
	case cmd.Name != name:
		t.Errorf("Route(%q) passes %q through; runc.Parse reads %q", args, name, cmd.Name)
	}
	switch name {
	case "create", "run", "restore", "exec", "update":
		t.Errorf("Route(%q) passes the policed %q through", args, name)
	}
}

func FuzzRoute(f *testing.F) {
	for _, s := range []string{"--root\x00/r\x00start\x00abc", "--log\x00--root\x00create", "--debug\x00kill\x00x\x009",
		"--root\x00--log\x00--log-format\x00delete", "-debug\x00start", "--root\x00start\x00--\x00create"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		agrees(t, strings.Split(s, "\x00"))
	})
}

// The real program: a pass-through reaches runc, everything else the check, with the same argv;
// a runc or check that is the program itself is refused rather than executed.
func TestHandover(t *testing.T) {
	shim, fakeRunc, fakeCheck := filepath.Join(binDir, shimName), filepath.Join(binDir, runcName), filepath.Join(binDir, checkName)
	tests := []struct {
		name       string
		env        []string
		args       []string
		wantOut    string
		wantStatus int
		wantErr    string
	}{
		{"start goes to runc", []string{envRunc + "=" + fakeRunc, envCheck + "=" + fakeCheck},
			append(append([]string{}, globals...), "start", "abc"), runcName + " " + strings.Join(globals, " ") + " start abc", 0, ""},
		{"create goes to the check", []string{envRunc + "=" + fakeRunc, envCheck + "=" + fakeCheck},
			[]string{"create", "--bundle", "/b", "abc"}, checkName + " create --bundle /b abc", 0, ""},
		{"an unusual shape goes to the check", []string{envRunc + "=" + fakeRunc, envCheck + "=" + fakeCheck},
			[]string{"--root=/r", "start", "abc"}, checkName + " --root=/r start abc", 0, ""},
		{"runc on PATH", []string{"PATH=/nowhere:" + binDir + "/runcdir", envCheck + "=" + fakeCheck},
			[]string{"state", "abc"}, "runc state abc", 0, ""},
		{"no runc: the check reports it", []string{"PATH=/nowhere", envCheck + "=" + fakeCheck},
			[]string{"state", "abc"}, checkName + " state abc", 0, ""},
		{"a relative runc: the check reports it", []string{envRunc + "=fake-runc", envCheck + "=" + fakeCheck},
			[]string{"kill", "abc"}, checkName + " kill abc", 0, ""},
		{"runc is the shim", []string{envRunc + "=" + shim, envCheck + "=" + fakeCheck},
			[]string{"start", "abc"}, "", 1, "is sharness-runtime itself"},
		{"runc is the shim, on exec", []string{envRunc + "=" + shim, envCheck + "=" + fakeCheck},
			[]string{"exec", "abc", "true"}, "", 255, "is sharness-runtime itself"},
		{"the check is the shim", []string{envRunc + "=" + fakeRunc, envCheck + "=" + shim},
			[]string{"create", "abc"}, "", 1, "the policy check " + shim + " is sharness-runtime itself"},
		{"a relative check", []string{envRunc + "=" + fakeRunc, envCheck + "=check"},
			[]string{"create", "abc"}, "", 1, "not an absolute path"},
		{"a missing check", []string{envRunc + "=" + fakeRunc, envCheck + "=/nowhere/check"},
			[]string{"update", "abc"}, "", 1, "exec /nowhere/check"},
	}
	runcDir := filepath.Join(binDir, "runcdir")
	if err := os.MkdirAll(runcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(fakeRunc, filepath.Join(runcDir, "runc")); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(shim, tt.args...)
			cmd.Env = append(tt.env, envChild+"=1")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			status := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.wantOut || status != tt.wantStatus || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("sharness-runtime %q: out %q, status %d, stderr %q; want %q, %d, %q", tt.args, out, status, stderr.String(), tt.wantOut, tt.wantStatus, tt.wantErr)
			}
		})
	}
}
