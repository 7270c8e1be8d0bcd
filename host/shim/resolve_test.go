package shim

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolve opens real files the way the shim does at a create: a source is described by what
// it opens (a link to a socket is a socket, under the socket's own name), a symbolic link below
// another source of the list is refused, and /proc and / are the host's views and state whatever
// they are called.
func TestResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{".claude", ".git/hooks"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for link, target := range map[string]string{
		filepath.Join(ws, ".vscode"):    "/",                          // planted by a cloned repository
		filepath.Join(ws, ".idea"):      filepath.Join(ws, ".claude"), // inside the workspace, still a link
		filepath.Join(dir, "innocent"):  sock,
		filepath.Join(dir, "elsewhere"): ws,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	sources := []string{ws, ws + "/.claude", ws + "/.vscode", ws + "/.idea", ws + "/.git/config", ws + "/.git/hooks/",
		dir + "/innocent", dir + "/elsewhere", "/proc", "/", "relative", dir + "/missing"}
	got, programs := osHost{}.Resolve(sources, []string{"/proc/self/exe"})
	for _, tc := range []struct {
		src              string
		path, err, holds string
		typ              fs.FileMode
	}{
		{src: ws, path: ws, typ: fs.ModeDir},
		{src: ws + "/.claude", path: ws + "/.claude", typ: fs.ModeDir},
		{src: ws + "/.vscode", err: "symbolic link"},
		{src: ws + "/.idea", err: "symbolic link"},
		{src: ws + "/.git/config", path: ws + "/.git/config", typ: 0},
		{src: ws + "/.git/hooks/", path: ws + "/.git/hooks", typ: fs.ModeDir},
		{src: dir + "/innocent", path: sock, typ: fs.ModeSocket},
		{src: dir + "/elsewhere", path: ws, typ: fs.ModeDir}, // not below another source by name: followed
		{src: "/proc", path: "/proc", typ: fs.ModeDir, holds: "/proc"},
		{src: "/", path: "/", typ: fs.ModeDir, holds: engineState[0]},
		{src: "relative", err: "not an absolute path"},
		{src: dir + "/missing", err: "no such file"},
	} {
		s, ok := got[tc.src]
		switch {
		case !ok:
			t.Errorf("%s: not resolved", tc.src)
		case tc.err != "" && !strings.Contains(s.Err, tc.err):
			t.Errorf("%s: %+v, want the error %q", tc.src, s, tc.err)
		case tc.err == "" && (s.Err != "" || s.Path != tc.path || s.Type != tc.typ || s.Holds != tc.holds):
			t.Errorf("%s: %+v, want path %s type %v holds %q", tc.src, s, tc.path, tc.typ, tc.holds)
		}
	}
	if got["/proc"].FS == 0xEF53 || !got["/"].MountPoint {
		t.Errorf("/proc on %#x, / a mount point %v: the descriptions are not the opened files'", got["/proc"].FS, got["/"].MountPoint)
	}
	if self, _ := os.Executable(); programs["/proc/self/exe"] != self {
		t.Errorf("the hook /proc/self/exe runs %q, want %q", programs["/proc/self/exe"], self)
	}
}

// FuzzCheck mutates what Docker wrote for the agent: whatever the bytes, Check does not panic,
// and what it allows keeps what no rule may give away: a read-only root, a process under
// no_new_privs with explicit capabilities, the OOM score set, a seccomp profile, every namespace
// of the policy, and no hook but the engine's.
func FuzzCheck(f *testing.F) {
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join("testdata", "docker-20.10", c+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	want, _ := compiled(f, "agent")
	fixture := dockerFixture(f, "agent")
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := LoadSpec(data)
		if err != nil {
			return
		}
		facts := fixtureFacts(got)
		facts.ID = fixtureFacts(fixture).ID
		if rs := Check(want, got, facts); len(rs) > 0 {
			return
		}
		switch {
		case got.Root == nil || !got.Root.Readonly:
			t.Fatal("allowed a writable root")
		case got.Process == nil || !got.Process.NoNewPrivileges || got.Process.Capabilities == nil || got.Process.OOMScoreAdj == nil:
			t.Fatal("allowed a process without no_new_privs, explicit capabilities or an OOM score")
		case got.Linux == nil || got.Linux.Seccomp == nil:
			t.Fatal("allowed no seccomp profile")
		case len(hookPaths(got)) > 1:
			t.Fatal("allowed a hook of its own")
		}
		for _, n := range want.Linux.Namespaces {
			found := false
			for _, g := range got.Linux.Namespaces {
				found = found || g.Type == n.Type
			}
			if !found {
				t.Fatalf("allowed the host's %s namespace", n.Type)
			}
		}
	})
}
