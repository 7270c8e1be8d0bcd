package shim

import (
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The shapes a current engine (Engine 29, containerd image store, runc 1.4) writes where Docker
// 20.10 wrote others (docs/engines.md).

func TestCheckRootPathSnapshotter(t *testing.T) {
	id := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	c := &comparison{facts: Facts{ID: id}}
	for _, tc := range []struct {
		got string
		ok  bool
	}{
		{"rootfs", true},
		{"/var/lib/docker/overlay2/" + other + "/merged", true},
		{"/var/lib/docker/rootfs/overlayfs/" + id, true},
		// Another container's root, another snapshotter, or not the engine's folder at all.
		{"/var/lib/docker/rootfs/overlayfs/" + other, false},
		{"/var/lib/docker/rootfs/native/" + id, false},
		{"/var/lib/docker/rootfs/overlayfs/" + id + "/..", false},
		{"/srv/rootfs/overlayfs/" + id, false},
		{"/", false},
	} {
		if got := checkRootPath(c, "root.path", "rootfs", tc.got); (len(got) == 0) != tc.ok {
			t.Errorf("root.path %q: reasons %v, want ok=%v", tc.got, got, tc.ok)
		}
	}
	if got := checkRootPath(&comparison{}, "root.path", "rootfs", "/var/lib/docker/rootfs/overlayfs/"+id); len(got) == 0 {
		t.Errorf("a snapshot root without a known container id was allowed")
	}
}

func TestEngineMadeSnapshotter(t *testing.T) {
	s := &specs.Spec{Root: &specs.Root{Path: "/var/lib/docker/rootfs/overlayfs/" + strings.Repeat("ab", 32)}}
	if !engineMade(s) {
		t.Errorf("a spec with the containerd image store's root is not seen as the engine's")
	}
}

// TestReadOnlyRecursive: "rro" (what Engine ≥ 25 writes for a read-only bind when runc can) is
// read-only; a later "rw" makes the shim count it writable (runc would keep the recursive
// attribute: the shim errs on the side of refusing).
func TestReadOnlyRecursive(t *testing.T) {
	if effective([]string{"rbind", "rro"})&flagRO == 0 {
		t.Errorf("rro is not read-only")
	}
	if _, ok := mountOptions("m", "bind", []string{"ro"}, []string{"rbind", "rro", "rprivate"}); !ok {
		t.Errorf("a compiled ro bind refused with rro")
	}
	if _, ok := mountOptions("m", "bind", []string{"ro"}, []string{"rbind", "rro", "rw"}); ok {
		t.Errorf("rro then rw allowed where read-only is compiled")
	}
	if _, ok := mountOptions("m", "bind", nil, []string{"rbind", "rrw"}); ok {
		t.Errorf("rrw (an option the shim does not know) allowed")
	}
}

// TestHostsEngine29: the hosts file Engine 29 writes (fe00:: and ff00::, where Docker 20.10 wrote
// fe00::0 and ff00::0) is Docker's own; another address for those names is not.
func TestHostsEngine29(t *testing.T) {
	const hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::\tip6-localnet\n" +
		"ff00::\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n172.30.1.5\tnet\n"
	if r, ok := checkHosts("mounts[/etc/hosts]", "net", hosts); !ok {
		t.Errorf("Engine 29's hosts file refused: %v", r)
	}
	for _, bad := range []string{"fe00::1\tip6-localnet\n", "fe00::%eth0\tip6-localnet\n", "::ffff:127.0.0.1\tlocalhost\n"} {
		if _, ok := checkHosts("mounts[/etc/hosts]", "net", bad); ok {
			t.Errorf("hosts line %q allowed", bad)
		}
	}
}

// TestTimeNamespaceEngine29: a new time namespace (Engine 29's default) is allowed where the
// policy has none; joining one, or naming it twice, is not.
func TestTimeNamespaceEngine29(t *testing.T) {
	want := []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}}
	with := func(ns ...specs.LinuxNamespace) []specs.LinuxNamespace {
		return append(append([]specs.LinuxNamespace{}, want...), ns...)
	}
	if rs := checkNamespaces(nil, "linux.namespaces", want, with(specs.LinuxNamespace{Type: specs.TimeNamespace})); len(rs) > 0 {
		t.Errorf("a new time namespace refused: %v", rs)
	}
	for name, got := range map[string][]specs.LinuxNamespace{
		"joined": with(specs.LinuxNamespace{Type: specs.TimeNamespace, Path: "/proc/1/ns/time"}),
		"twice":  with(specs.LinuxNamespace{Type: specs.TimeNamespace}, specs.LinuxNamespace{Type: specs.TimeNamespace}),
		"user":   with(specs.LinuxNamespace{Type: specs.UserNamespace}),
	} {
		if rs := checkNamespaces(nil, "linux.namespaces", want, got); len(rs) == 0 {
			t.Errorf("%s: allowed", name)
		}
	}
}
