package restrict

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/sharness-ai/sharness/policies/landlock"
)

// The helper makes the domain itself; these hold what it copied to their sources.
func TestConstants(t *testing.T) {
	if MinABI != landlock.MinABI {
		t.Errorf("MinABI = %d, policies/landlock.MinABI = %d", MinABI, landlock.MinABI)
	}
	if HelperPath != landlock.HelperPath || HealthArg != landlock.HealthArg {
		t.Errorf("HelperPath, HealthArg = %q, %q; policies/landlock's = %q, %q", HelperPath, HealthArg, landlock.HelperPath, landlock.HealthArg)
	}
	if !slices.Equal(devices, landlock.Devices) {
		t.Errorf("devices = %q, policies/landlock.Devices = %q", devices, landlock.Devices)
	}
	rights := []struct {
		name      string
		got, want uint64
	}{
		{"execute", fsExecute, ll.AccessFSExecute}, {"write file", fsWriteFile, ll.AccessFSWriteFile},
		{"read file", fsReadFile, ll.AccessFSReadFile}, {"read dir", fsReadDir, ll.AccessFSReadDir},
		{"remove dir", fsRemoveDir, ll.AccessFSRemoveDir}, {"remove file", fsRemoveFile, ll.AccessFSRemoveFile},
		{"make char", fsMakeChar, ll.AccessFSMakeChar}, {"make dir", fsMakeDir, ll.AccessFSMakeDir},
		{"make reg", fsMakeReg, ll.AccessFSMakeReg}, {"make sock", fsMakeSock, ll.AccessFSMakeSock},
		{"make fifo", fsMakeFifo, ll.AccessFSMakeFifo}, {"make block", fsMakeBlock, ll.AccessFSMakeBlock},
		{"make sym", fsMakeSym, ll.AccessFSMakeSym}, {"refer", fsRefer, ll.AccessFSRefer},
		{"truncate", fsTruncate, ll.AccessFSTruncate}, {"ioctl dev", fsIoctlDev, ll.AccessFSIoctlDev},
		{"resolve unix", fsResolveUnix, ll.AccessFSResolveUnix},
		{"bind tcp", netBindTCP, ll.AccessNetBindTCP}, {"connect tcp", netConnectTCP, ll.AccessNetConnectTCP},
		{"scopes", scopeAll, ll.ScopeAbstractUnixSocket | ll.ScopeSignal},
		{"tsync", restrictSelfTSync, ll.FlagRestrictSelfTSync},
	}
	for _, r := range rights {
		if r.got != r.want {
			t.Errorf("%s = %#x, go-landlock's %#x", r.name, r.got, r.want)
		}
	}
}

// TestLevels: each level handles what go-landlock's preset for that ABI does.
func TestLevels(t *testing.T) {
	presets := []golandlock.Config{golandlock.V1, golandlock.V2, golandlock.V3, golandlock.V4, golandlock.V5,
		golandlock.V6, golandlock.V7, golandlock.V8, golandlock.V9, golandlock.V10, golandlock.V11}
	if len(levels) != len(presets)+1 {
		t.Fatalf("%d levels, go-landlock has %d presets", len(levels)-1, len(presets))
	}
	for i, c := range presets {
		got, want := levels[i+1], level{fs: uint64(c.HandledAccessFS), net: uint64(c.HandledAccessNet), scoped: uint64(c.Scoped)}
		if got != want {
			t.Errorf("level %d = %+v, go-landlock's V%d %+v", i+1, got, i+1, want)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, d := range []Domain{
		{},
		{BestEffort: true},
		{Exec: []string{"/bin/busybox", "/usr/lib/"}, Write: []string{"/tmp", "/workspace"}, Bind: []uint16{8080}, Connect: []uint16{53, 3128, 65535}},
		{Exec: []string{"/a b", "/x12:/y", "/ c5"}, Write: []string{"/--", "/\n"}, AnyConnect: true},
	} {
		s := d.Encode()
		got, err := Decode(s)
		if err != nil {
			t.Errorf("Decode(%q): %v", s, err)
			continue
		}
		if diff := cmp.Diff(d, got); diff != "" {
			t.Errorf("Decode(%q) (-want +got):\n%s", s, diff)
		}
	}
	if got, want := (Domain{Exec: []string{"/bin/busybox"}, Write: []string{"/tmp"}, Connect: []uint16{53}, AnyConnect: true}).Encode(),
		"enforce x12:/bin/busybox w4:/tmp c53 a"; got != want {
		t.Errorf("Encode = %q, want %q", got, want)
	}
	args := []string{"best_effort w4:/tmp", "--", "prog", "--", "-x"}
	if d, argv, err := ParseArgs(args); err != nil || !d.BestEffort || !slices.Equal(argv, args[2:]) {
		t.Errorf("ParseArgs(%q) = %+v, %q, %v", args, d, argv, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, s := range []string{
		"", "off", "Enforce", "per_command", "enforce ", "enforce  a", "enforce a ", "enforce y", "enforce ax",
		"enforce x5:/tmp", "enforce x3:/tmpx", "enforce x:/tmp", "enforce x04:/tmp", "enforce x+4:/tmp", "enforce x0:",
		"enforce x4/tmp", "enforce x4:tmp/", "enforce w1:", "enforce c0", "enforce c053", "enforce c65536", "enforce c-1",
		"enforce c", "enforce c 53", "enforce b+80", "enforce c123456789", "enforce c53x", "enforce c53,54",
	} {
		if d, err := Decode(s); err == nil {
			t.Errorf("Decode(%q) = %+v; want an error", s, d)
		}
	}
	for _, args := range [][]string{nil, {"enforce"}, {"enforce", "--"}, {"enforce", "prog"}, {"enforce", "-", "prog"}} {
		if d, argv, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) = %+v, %q; want an error", args, d, argv)
		}
	}
}

// FuzzDecode: Decode never panics, and what it reads, Encode writes so that Decode reads it again.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"enforce", "best_effort x12:/bin/busybox w4:/tmp b80 c53 a", "enforce x3:/a: c1", "enforce x99:/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Decode(s)
		if err != nil {
			return
		}
		again, err := Decode(d.Encode())
		if err != nil || !cmp.Equal(d, again) {
			t.Errorf("Decode(%q) = %+v; Decode(Encode) = %+v, %v", s, d, again, err)
		}
	})
}

func TestRules(t *testing.T) {
	d := Domain{Exec: []string{"/bin/busybox", "/usr/lib/"}, Write: []string{"/tmp"}, Bind: []uint16{80}, Connect: []uint16{53}}
	r := rules(d, 7)
	if r.fs != 1<<16-1 || r.net != netBindTCP|netConnectTCP || r.scoped != scopeAll {
		t.Errorf("ABI 7 handles fs %#x net %#x scoped %#x", r.fs, r.net, r.scoped)
	}
	want := map[string]uint64{"/": fsReadFile | fsReadDir, "/bin/busybox": fsReadFile | fsExecute,
		"/usr/lib/": fsReadFile | fsReadDir | fsExecute, "/tmp": dirWrite, "/dev/null": device, "/dev/pts": device | fsReadDir}
	for _, p := range r.paths {
		if w, ok := want[p.path]; ok && p.access != w {
			t.Errorf("%s: access %#x, want %#x", p.path, p.access, w)
		}
		if p.access&fsExecute != 0 && slices.Contains(d.Write, p.path) {
			t.Errorf("%s is writable and executable", p.path)
		}
		if p.ignoreMissing != (p.path != "/" && p.path != "/tmp") {
			t.Errorf("%s: ignoreMissing %v", p.path, p.ignoreMissing)
		}
	}
	if len(r.paths) != 1+2+1+len(devices) {
		t.Errorf("%d path rules, want %d", len(r.paths), 1+2+1+len(devices))
	}
	if want := []portRule{{netBindTCP, 80}, {netConnectTCP, 53}}; !slices.Equal(r.ports, want) {
		t.Errorf("ports %v, want %v", r.ports, want)
	}
	// Any connect: connect unhandled, so no connect rule; ABI 9 adds resolving sockets to "/".
	r = rules(Domain{AnyConnect: true, Connect: []uint16{53}}, 9)
	if r.net != netBindTCP || len(r.ports) != 0 || r.paths[0].access != fsReadFile|fsReadDir|fsResolveUnix {
		t.Errorf("ABI 9, any connect: net %#x, ports %v, / %#x", r.net, r.ports, r.paths[0].access)
	}
	// ABI 3 has no network rights: no port rule; a kernel past the last level is held to it.
	if r = rules(d, 3); r.net != 0 || len(r.ports) != 0 || r.scoped != 0 {
		t.Errorf("ABI 3: net %#x, ports %v, scoped %#x", r.net, r.ports, r.scoped)
	}
	if r = rules(d, 99); r.fs != levels[len(levels)-1].fs || r.net != netBindTCP|netConnectTCP {
		t.Errorf("ABI 99: fs %#x net %#x", r.fs, r.net)
	}
}
