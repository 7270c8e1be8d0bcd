package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run real sandboxes. A kernel or host without what a sandbox needs fails them,
// with Plan's message: a sandbox that silently does not exist must not pass.

var planned struct {
	once sync.Once
	s    *Sandbox
	err  error
}

func realSandbox(t testing.TB) *Sandbox {
	t.Helper()
	planned.once.Do(func() {
		f := Check(context.Background())
		// As root the process limit does not bind: TestForkBomb runs as nobody for that, and
		// every other test is the same as root or not.
		f.Root = false
		planned.s, _, planned.err = Plan(f, false)
	})
	if planned.err != nil {
		t.Fatalf("this host cannot run sandboxes: %v", planned.err)
	}
	return planned.s
}

// workspace is a fresh folder outside /tmp (which the sandbox replaces).
func workspace(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "sharness-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func run(t testing.TB, s Spec) Result {
	t.Helper()
	res, err := realSandbox(t).Run(context.Background(), s)
	if err != nil {
		t.Fatalf("Run(%q): %v", s.Command, err)
	}
	return res
}

// proxy listens on a loopback port, standing in for net in build's tests.
func proxy(t *testing.T) (addr string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("proxy\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestSandbox(t *testing.T) {
	ws := workspace(t)
	if err := os.MkdirAll(filepath.Join(ws, "src/pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "src/pkg/file"), []byte("content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	px, other := proxy(t), proxy(t)
	_, otherPort, _ := net.SplitHostPort(other)
	tests := []struct {
		name       string
		profile    Profile
		cwd        string
		command    string
		wantExit   int
		wantStdout string // a substring, or the whole output when it starts with "="
		wantStderr string // a substring
	}{
		{"echo", Analyse, "", "echo ok", 0, "=ok\n", ""},
		{"exit status", Analyse, "", "exit 7", 7, "=", ""},
		{"signal", Analyse, "", "kill -TERM $$", 143, "=", ""},
		{"hostname", Analyse, "", "hostname", 0, "=sandbox\n", ""},
		{"uid 1000 without capabilities", Build, "", "id -u; grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status", 0,
			"=1000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapAmb:\t0000000000000000\n", ""},
		{"no_new_privs", Analyse, "", "grep NoNewPrivs /proc/self/status", 0, "NoNewPrivs:\t1", ""},
		{"seccomp", Analyse, "", "grep -E '^Seccomp:' /proc/self/status", 0, "Seccomp:\t2", ""},
		{"working folder", Analyse, "src/pkg", "pwd; cat file", 0, "=" + ws + "/src/pkg\ncontent\n", ""},
		{"minimal environment", Analyse, "", "env | sort", 0, "=HOME=/tmp\nLANG=C.UTF-8\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nPWD=" + ws + "\nSHLVL=1\nTERM=dumb\nUSER=sandbox\n_=/usr/bin/env\n", ""},
		{"build's proxy environment", Build, "", "env | grep -i _proxy | sort", 0, "=HTTPS_PROXY=http://" + px + "\nHTTP_PROXY=http://" + px + "\nhttp_proxy=http://" + px + "\nhttps_proxy=http://" + px + "\n", ""},
		{"analyse reads the workspace", Analyse, "", "cat src/pkg/file", 0, "=content\n", ""},
		{"analyse cannot write the workspace", Analyse, "", "echo x > new", 1, "=", "Read-only file system"},
		{"analyse cannot remove from the workspace", Analyse, "", "rm src/pkg/file", 1, "=", "Read-only file system"},
		{"build writes the workspace", Build, "", "echo built > built && cat built", 0, "=built\n", ""},
		{"build renames across folders", Build, "", "echo m > moved && mv moved src/ && cat src/moved", 0, "=m\n", ""},
		{"/tmp is writable", Analyse, "", "echo t > /tmp/t && cat /tmp/t", 0, "=t\n", ""},
		{"no exec from the workspace", Build, "", "printf '#!/bin/sh\\necho ran\\n' > x.sh && chmod +x x.sh && ./x.sh", 126, "=", "Permission denied"},
		{"no exec from /tmp", Analyse, "", "printf '#!/bin/sh\\necho ran\\n' > /tmp/x.sh && chmod +x /tmp/x.sh && /tmp/x.sh", 126, "=", "Permission denied"},
		{"no loader trick from /tmp", Analyse, "", "cp /usr/bin/true /tmp/t && /lib64/ld-linux-x86-64.so.2 /tmp/t", 127, "=", "failed to map segment"},
		{"no write to the userland", Build, "", "echo x > /usr/local/x", 1, "=", ""},
		{"no reading outside the allowed paths", Analyse, "", "ls /root /home /var", 2, "=", "Permission denied"},
		{"only the sandbox's processes", Analyse, "", "cd /proc && set -- [0-9]* && echo $# $1", 0, "=2 1\n", ""},
		{"pid 1 survives SIGKILL from inside", Analyse, "", "kill -9 1; echo still here", 0, "=still here\n", ""},
		{"pid 1 survives SIGTERM and SIGQUIT", Analyse, "", "sleep 0.1; kill -TERM 1; kill -QUIT 1; sleep 0.1; echo still here", 0, "=still here\n", ""},
		{"pid 1's memory is closed", Analyse, "", "head -c 1 /proc/1/environ", 1, "=", "Permission denied"},
		{"/run is empty", Analyse, "", "ls -A /run; test -e /run/sharness && echo visible", 1, "=", ""},
		{"analyse has only lo", Analyse, "", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", 0, "=lo\n", ""},
		// Landlock refuses before the empty network namespace could: no TCP connect at all.
		{"analyse connects nowhere", Analyse, "", "exec 3<>/dev/tcp/1.1.1.1/80", 1, "=", "Permission denied"},
		{"analyse cannot reach the proxy", Analyse, "", "exec 3<>/dev/tcp/" + strings.Replace(px, ":", "/", 1), 1, "=", "Permission denied"},
		{"build reaches the proxy", Build, "", "exec 3<>/dev/tcp/" + strings.Replace(px, ":", "/", 1) + " && cat <&3", 0, "=proxy\n", ""},
		{"build reaches no other port", Build, "", "exec 3<>/dev/tcp/127.0.0.1/" + otherPort, 1, "=", "Permission denied"},
		{"mount", Build, "", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", 32, "=", "must be superuser"},
		{"unshare", Build, "", "unshare -U true", 1, "=", "Operation not permitted"},
		{"unshare with root mapped", Build, "", "unshare -Ur true", 1, "=", "Operation not permitted"},
		{"nsenter", Build, "", "nsenter -t $$ -m true", 1, "=", "Operation not permitted"},
		{"file size limit", Analyse, "", "head -c 600M /dev/zero > /tmp/big", 128 + 25, "=", "File size limit exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, Spec{Command: tt.command, Profile: tt.profile, Cwd: tt.cwd, Workspace: ws, ProxyAddr: px,
				Limits: Limits{TmpSize: 700 << 20}})
			out, errOut := string(res.Stdout), string(res.Stderr)
			if res.ExitCode != tt.wantExit {
				t.Errorf("exit %d (%s), want %d; stderr %q", res.ExitCode, res.Signal, tt.wantExit, errOut)
			}
			if want, whole := strings.CutPrefix(tt.wantStdout, "="); whole && out != want || !whole && !strings.Contains(out, want) {
				t.Errorf("stdout %q, want %q", out, tt.wantStdout)
			}
			if !strings.Contains(errOut, tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.wantStderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(ws, "built")); err != nil || string(b) != "built\n" {
		t.Errorf("the host sees the workspace file %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); err == nil {
		t.Error("analyse wrote the workspace")
	}
}

// TestPtrace needs strace, which the bash image has; a host without it skips, saying so.
func TestPtrace(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skipf("strace is not installed on this host (%v): ptrace is also covered by TestFilter", err)
	}
	res := run(t, Spec{Command: "strace true", Profile: Build, Workspace: workspace(t), ProxyAddr: "net:3128"})
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Operation not permitted") {
		t.Errorf("strace: exit %d, stderr %q; want EPERM", res.ExitCode, res.Stderr)
	}
}

// TestReadOnlyMountBelowWorkspace: a read-only mount under the workspace (the container's
// protected paths) stays read-only in build, and cannot be renamed away.
func TestReadOnlyMountBelowWorkspace(t *testing.T) {
	ws := workspace(t)
	if err := os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Make the mount in a throwaway user and mount namespace of our own, then run the sandbox
	// from there: no host mount is touched.
	script := fmt.Sprintf("mount --bind -o ro %[1]s/.git %[1]s/.git && mount -o remount,bind,ro %[1]s/.git && exec %[2]s -test.run '^TestReadOnlyMountHelper$' -test.v", ws, os.Args[0])
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "SHARNESS_SANDBOX_TEST_WS="+ws)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestReadOnlyMountHelper")) {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

func TestReadOnlyMountHelper(t *testing.T) {
	ws := os.Getenv("SHARNESS_SANDBOX_TEST_WS")
	if ws == "" {
		t.Skip("run by TestReadOnlyMountBelowWorkspace")
	}
	for _, tt := range []struct{ command, want string }{
		{"echo x > .git/hooks/pre-commit", "Read-only file system"},
		{"mv .git .git2", "Device or resource busy"},
	} {
		res := run(t, Spec{Command: tt.command, Profile: Build, Workspace: ws, ProxyAddr: "net:3128"})
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), tt.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", tt.command, res.ExitCode, res.Stderr, tt.want)
		}
	}
}

// TestForkBomb runs as nobody when the tests run as root: the kernel exempts uid 0 from
// RLIMIT_NPROC, so a sandbox mapped to root has no process limit of its own.
func TestForkBomb(t *testing.T) {
	if os.Getuid() == 0 {
		asNobody(t, "^TestForkBomb$")
		return
	}
	ws := workspace(t)
	// A bounded burst first: were the limit not to bind, a real bomb would take the host down.
	res := run(t, Spec{Command: "for i in $(seq 64); do sleep 3 & done; wait", Profile: Analyse, Workspace: ws,
		Timeout: 2 * time.Second, Limits: Limits{PIDs: 16}})
	if !strings.Contains(string(res.Stderr), "Resource temporarily unavailable") {
		t.Fatalf("64 processes under a limit of 16: exit %d, stderr %q: the limit does not bind, not trying a fork bomb", res.ExitCode, head(res.Stderr))
	}
	res = run(t, Spec{Command: ":(){ :|:& };:; sleep 3", Profile: Analyse, Workspace: ws, Timeout: 5 * time.Second, Limits: Limits{PIDs: 64}})
	if !strings.Contains(string(res.Stderr), "Resource temporarily unavailable") {
		t.Errorf("fork bomb: exit %d, timed out %v, stderr %q: want the pids limit's EAGAIN", res.ExitCode, res.TimedOut, head(res.Stderr))
	}
	if res := run(t, Spec{Command: "echo ok", Profile: Analyse, Workspace: ws}); string(res.Stdout) != "ok\n" {
		t.Errorf("after the bomb: %+v", res)
	}
}

// asNobody runs the tests matching pattern in a copy of this binary as uid and gid 65534.
func asNobody(t *testing.T, pattern string) {
	dir := workspace(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := exec.Command("cp", os.Args[0], bin).Run(); err != nil {
		t.Fatalf("copy the test binary: %v", err)
	}
	cmd := exec.Command(bin, "-test.run", pattern, "-test.v")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("as nobody: %v", err)
	}
}

func TestRunaway(t *testing.T) {
	const marker = "1000.4242"
	start := time.Now()
	res := run(t, Spec{Command: "sleep " + marker + " & sleep " + marker, Profile: Analyse, Workspace: workspace(t), Timeout: time.Second})
	if took := time.Since(start); !res.TimedOut || res.Signal != "SIGKILL" || took > 5*time.Second {
		t.Errorf("runaway: timed out %v, signal %q, after %v; want a timeout within seconds", res.TimedOut, res.Signal, took)
	}
	time.Sleep(100 * time.Millisecond)
	if left := processesWith("sleep\x00" + marker); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// TestNothingLeftBehind: when Run returns, what the command started in the background is dead
// too, even when it holds none of the output streams.
func TestNothingLeftBehind(t *testing.T) {
	const marker = "1000.777"
	ws := workspace(t)
	for range 20 {
		run(t, Spec{Command: "sleep " + marker + " >/dev/null 2>&1 & exit 0", Profile: Analyse, Workspace: ws})
		if left := processesWith("sleep\x00" + marker); len(left) > 0 {
			t.Fatalf("processes alive after Run returned: %v", left)
		}
	}
}

// processesWith lists the pids whose command line contains s.
func processesWith(s string) []string {
	var found []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(s)) {
			found = append(found, d.Name())
		}
	}
	return found
}

func TestOutputCap(t *testing.T) {
	res := run(t, Spec{Command: "head -c 100000000 /dev/zero; echo err >&2", Profile: Analyse, Workspace: workspace(t)})
	if !res.StdoutTruncated || res.StdoutBytes != 100000000 || int64(len(res.Stdout)) != DefaultLimits.Output {
		t.Errorf("stdout: truncated %v, %d bytes seen, %d kept", res.StdoutTruncated, res.StdoutBytes, len(res.Stdout))
	}
	if res.StderrTruncated || string(res.Stderr) != "err\n" || res.StderrBytes != 4 {
		t.Errorf("stderr: truncated %v, %q, %d bytes", res.StderrTruncated, res.Stderr, res.StderrBytes)
	}
}

func TestSetupFailure(t *testing.T) {
	_, err := realSandbox(t).Run(context.Background(), Spec{Command: "true", Profile: Analyse, Workspace: workspace(t), Cwd: "missing"})
	if err == nil || !strings.Contains(err.Error(), "working folder") {
		t.Errorf("Run with a missing working folder: %v, want a setup error naming it", err)
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := realSandbox(t).Run(ctx, Spec{Command: "sleep 30", Profile: Analyse, Workspace: workspace(t)})
	if err == nil || res.TimedOut {
		t.Errorf("canceled Run: %v, timed out %v; want the context's error", err, res.TimedOut)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 300)] }
