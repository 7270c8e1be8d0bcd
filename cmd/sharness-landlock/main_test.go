package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sharness-ai/sharness/host/shim/restrict"
	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// The test binary plays both parts, as go-landlock's own tests do (a domain cannot be undone, so
// it is made in a child): with envMode set it is the helper (main), and the program the helper
// executes under the domain is the test binary again, with "probe" as its first argument.
const envMode = "SHARNESS_LANDLOCK_TEST"

func TestMain(m *testing.M) {
	if os.Getenv(envMode) != "" {
		if len(os.Args) > 1 && os.Args[1] == "probe" {
			probe(os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6])
			os.Exit(0)
		}
		main()
	}
	os.Exit(m.Run())
}

// probe tries what the domain decides and prints one JSON object of outcomes. The test process,
// outside the domain, is its parent and listens on the abstract unix socket abstract.
func probe(writable, other, allowedAddr, deniedAddr, abstract string) {
	write := func(dir string) string {
		err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
		return kind(err)
	}
	dial := func(addr string) string {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return kind(err)
	}
	self, _ := os.Executable()
	exe, _ := sidedoor.CopyExec(self, writable, "-test.run=^$")(context.Background())
	bind := func(addr string) string {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
		}
		return kind(err)
	}
	unixDial := func() string {
		c, err := net.Dial("unix", "@"+abstract)
		if err == nil {
			c.Close()
		}
		return kind(err)
	}
	out := map[string]string{"write-allowed": write(writable), "write-other": write(other),
		"exec-copy": exe, "connect-allowed": dial(allowedAddr), "connect-other": dial(deniedAddr),
		"signal-outside": kind(syscall.Kill(os.Getppid(), 0)), "abstract-outside": unixDial(),
		// The domain lists no port to bind: a named port is refused (before its owner is asked),
		// while an ephemeral one (port 0) is not, on this kernel: docs/shim.md says so.
		"bind-unlisted": bind(deniedAddr), "bind-ephemeral": bind("127.0.0.1:0")}
	json.NewEncoder(os.Stdout).Encode(out)
}

func kind(err error) string {
	if err == nil {
		return "ok"
	}
	return sidedoor.Kind(err)
}

func TestHelperConfines(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	writable, other := t.TempDir(), t.TempDir()
	var ports [2]uint16
	var addrs [2]string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for c, err := l.Accept(); err == nil; c, err = l.Accept() {
				c.Close()
			}
		}()
		addrs[i], ports[i] = l.Addr().String(), uint16(l.Addr().(*net.TCPAddr).Port)
	}
	// The test binary may be dynamically linked: its loader must be executable too.
	exe := []string{self, "/lib64/ld-linux-x86-64.so.2"}
	if real, err := filepath.EvalSymlinks(exe[1]); err == nil {
		exe = append(exe, real)
	}
	// An abstract unix socket and this process, both outside the domain: scoped away (ABI 6).
	abstract := fmt.Sprintf("sharness-landlock-test-%d", os.Getpid())
	ul, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	go func() {
		for c, err := ul.Accept(); err == nil; c, err = ul.Accept() {
			c.Close()
		}
	}()
	d := restrict.Domain{Exec: exe, Write: []string{writable}, Connect: []uint16{ports[0]}}
	cmd := exec.Command(self, d.Encode(), "--", self, "probe", writable, other, addrs[0], addrs[1], abstract)
	cmd.Env = append(os.Environ(), envMode+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if restrict.ABI() < landlock.MinABI { // the kernel cannot enforce it: the helper must refuse, not run
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 126 || !strings.Contains(stderr.String(), "Landlock ABI") {
			t.Fatalf("kernel ABI %d: helper %v, stderr %q; want exit 126 naming the ABI", restrict.ABI(), err, stderr.String())
		}
		return
	}
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	want := map[string]string{"write-allowed": "ok", "write-other": "EACCES", "exec-copy": "EACCES",
		"connect-allowed": "ok", "connect-other": "EACCES", "signal-outside": "EPERM", "abstract-outside": "EPERM", "bind-unlisted": "EACCES", "bind-ephemeral": "ok"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestHelperRefuses(t *testing.T) {
	self, _ := os.Executable()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no separator", []string{"enforce", self}, "usage"},
		{"no program", []string{"enforce", "--"}, "usage"},
		{"a bad mode", []string{"off", "--", self}, "mode"},
		{"per_command", []string{"per_command", "--", self}, "per_command"},
		{"a bad domain", []string{"enforce c0", "--", self}, "port"},
		{"a missing program", []string{restrict.Domain{BestEffort: true, Exec: []string{"/nowhere"}}.Encode(), "--", "/nowhere/prog"}, "find /nowhere/prog"},
		{"a program not in PATH", []string{restrict.Domain{BestEffort: true}.Encode(), "--", "sharness-no-such-program"}, "not in PATH"},
		{"a missing writable folder", []string{restrict.Domain{BestEffort: true, Write: []string{"/nowhere"}}.Encode(), "--", self}, "/nowhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(self, tt.args...)
			cmd.Env = append(os.Environ(), envMode+"=1")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 126 || !strings.Contains(string(out), tt.wantErr) {
				t.Errorf("helper %q: %v, %q; want exit 126 and %q", tt.args, err, out, tt.wantErr)
			}
		})
	}
}

// TestHelperHealth: `HELPER DOMAIN -- /.sharness-landlock -health` (the health check of a
// confined component, which the shim wraps in its domain) makes the domain and exits 0 without
// executing anything; the same arguments naming another program, or another argument, run it.
func TestHelperHealth(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := restrict.Domain{Exec: []string{self}}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(self, append([]string{d.Encode(), "--"}, args...)...)
		cmd.Env = append(os.Environ(), envMode+"=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return exit.ExitCode(), string(out)
		case err != nil:
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(landlock.HelperPath, landlock.HealthArg); code != 0 || out != "" {
		t.Errorf("the health check: exit %d, output %q; want 0 and nothing", code, out)
	}
	// Not the health check: the helper tries to execute /.sharness-landlock, which is not there.
	if code, out := run(landlock.HelperPath, "-other"); code != 126 || !strings.Contains(out, landlock.HelperPath) {
		t.Errorf("another argument: exit %d, output %q; want 126 naming the program", code, out)
	}
}
