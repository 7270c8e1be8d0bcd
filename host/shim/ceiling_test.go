package shim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// worldLike is a spec as the engine writes it for compose/world.yml's world: every capability
// dropped, uid 65520, no new privileges, a read-only root, the default seccomp filter, its own
// namespaces, the masked paths, the one sysctl.
func worldLike() *specs.Spec {
	return &specs.Spec{
		Process: &specs.Process{User: specs.User{UID: 65520, GID: 65520}, NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{}, Args: []string{"/sharness-world"}},
		Root: &specs.Root{Path: "rootfs", Readonly: true},
		Linux: &specs.Linux{
			CgroupsPath: "/docker/" + worldID,
			Seccomp:     &specs.LinuxSeccomp{DefaultAction: specs.ActErrno},
			Namespaces: []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: "/var/run/docker/netns/0123456789ab"},
				{Type: specs.UTSNamespace}, {Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.CgroupNamespace}},
			MaskedPaths:   []string{"/proc/kcore"},
			ReadonlyPaths: []string{"/proc/sys"},
			Sysctl:        map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.ping_group_range": "0 2147483647"},
		},
	}
}

// worldID is the container id worldLike's spec is for.
var worldID = strings.Repeat("a", 64)

// TestFixtureCeiling: a fixture as compose/world.yml runs it passes; each widening an attacker's
// compose file or docker run could ask for is refused naming its field.
func TestFixtureCeiling(t *testing.T) {
	if rs := FixtureCeiling(worldID, worldLike()); len(rs) > 0 {
		t.Fatalf("the world as compose/world.yml runs it: %v", rs)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*specs.Spec)
		field string
	}{
		{"a bounding capability", func(s *specs.Spec) { s.Process.Capabilities.Bounding = []string{"CAP_NET_ADMIN"} }, "process.capabilities.bounding"},
		{"an ambient capability", func(s *specs.Spec) { s.Process.Capabilities.Ambient = []string{"CAP_SYS_ADMIN"} }, "process.capabilities.ambient"},
		{"an effective capability", func(s *specs.Spec) { s.Process.Capabilities.Effective = []string{"CAP_SYS_ADMIN"} }, "process.capabilities.effective"},
		{"an inheritable capability", func(s *specs.Spec) { s.Process.Capabilities.Inheritable = []string{"CAP_SYS_ADMIN"} }, "process.capabilities.inheritable"},
		{"a permitted capability", func(s *specs.Spec) { s.Process.Capabilities.Permitted = []string{"CAP_SYS_ADMIN"} }, "process.capabilities.permitted"},
		{"root", func(s *specs.Spec) { s.Process.User.UID = 0 }, "process.user"},
		{"group root", func(s *specs.Spec) { s.Process.User.GID = 0 }, "process.user"},
		{"a root supplementary group", func(s *specs.Spec) { s.Process.User.AdditionalGids = []uint32{0} }, "process.user"},
		{"new privileges", func(s *specs.Spec) { s.Process.NoNewPrivileges = false }, "process.noNewPrivileges"},
		{"a writable root", func(s *specs.Spec) { s.Root.Readonly = false }, "root.readonly"},
		{"no root", func(s *specs.Spec) { s.Root = nil }, "root.readonly"},
		{"seccomp unconfined", func(s *specs.Spec) { s.Linux.Seccomp = nil }, "linux.seccomp"},
		{"a seccomp filter that allows by default", func(s *specs.Spec) { s.Linux.Seccomp.DefaultAction = specs.ActAllow }, "linux.seccomp.defaultAction"},
		{"a seccomp filter that only logs", func(s *specs.Spec) { s.Linux.Seccomp.DefaultAction = specs.ActLog }, "linux.seccomp.defaultAction"},
		{"the host's pid namespace", func(s *specs.Spec) { s.Linux.Namespaces = s.Linux.Namespaces[:3] }, "linux.namespaces.pid"},
		{"the host's mount namespace", func(s *specs.Spec) { s.Linux.Namespaces = s.Linux.Namespaces[1:] }, "linux.namespaces.mount"},
		{"no masked paths", func(s *specs.Spec) { s.Linux.MaskedPaths = nil }, "linux.maskedPaths"},
		{"no read-only paths", func(s *specs.Spec) { s.Linux.ReadonlyPaths = nil }, "linux.maskedPaths"},
		{"a device", func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/fuse"}} }, "linux.devices"},
		{"another sysctl", func(s *specs.Spec) { s.Linux.Sysctl["kernel.shm_rmid_forced"] = "1" }, "linux.sysctl[kernel.shm_rmid_forced]"},
		{"another cgroup (--cgroup-parent)", func(s *specs.Spec) { s.Linux.CgroupsPath = "/" }, "linux.cgroupsPath"},
		{"another container's cgroup", func(s *specs.Spec) { s.Linux.CgroupsPath = "/docker/" + strings.Repeat("d", 64) }, "linux.cgroupsPath"},
		{"no process", func(s *specs.Spec) { s.Process = nil }, "process"},
		{"no linux section", func(s *specs.Spec) { s.Linux = nil }, "linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := worldLike()
			tc.edit(s)
			rs := FixtureCeiling(worldID, s)
			found := false
			for _, r := range rs {
				if r.Field == tc.field || strings.HasPrefix(r.Field, tc.field+".") {
					found = true
				}
			}
			if !found {
				t.Errorf("refusals %v name no %s", rs, tc.field)
			}
		})
	}
}

// withCaps is a copy of s whose process has caps in every set.
func withCaps(s *specs.Spec, caps ...string) *specs.Spec {
	c := *s
	p := *s.Process
	p.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Inheritable: caps, Permitted: caps, Ambient: caps}
	c.Process = &p
	return &c
}

// TestFixtureCeilingAdmitsWhatDockerWrote: the world's and the model's specs as Docker 20.10
// wrote them for the offline world's stack (testdata/docker-20.10, captured by e2e
// TestShimFixtures) are within the ceiling, so the ceiling refuses nothing the fixtures need
// (Docker's own ping_group_range among it).
func TestFixtureCeilingAdmitsWhatDockerWrote(t *testing.T) {
	for _, name := range []string{"world", "model"} {
		data, err := os.ReadFile(filepath.Join("testdata", "docker-20.10", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := LoadSpec(data)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimPrefix(s.Linux.CgroupsPath, "/docker/") // the id Docker ran it as
		if rs := FixtureCeiling(id, s); len(rs) > 0 {
			t.Errorf("%s as Docker wrote it: %v", name, rs)
		}
	}
}
