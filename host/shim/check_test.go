package shim

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
)

// compiled reads a component's config.json from the repository's compiled output.
// compiled reads a component's spec as the offline world's policy compiles it
// (compose/world/compiled): testdata/docker-20.10 is what Docker wrote for that stack. It equals
// the default policy's but for the test world's mark (policies/world_test.go).
func compiled(t testing.TB, component string) (*specs.Spec, []byte) {
	t.Helper()
	return compiledIn(t, filepath.Join("..", "..", "compose", "world", "compiled"), component)
}

// compiledDefault reads a component's spec as the default (production) policy compiles it.
func compiledDefault(t testing.TB, component string) (*specs.Spec, []byte) {
	t.Helper()
	return compiledIn(t, filepath.Join("..", "..", "compiled"), component)
}

// rehash is s with every mention of one policy hash replaced by another.
func rehash(t testing.TB, s *specs.Spec, from, to string) *specs.Spec {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := LoadSpec([]byte(strings.ReplaceAll(string(raw), from, to)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compiledIn(t testing.TB, dir, component string) (*specs.Spec, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, component, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSpec(data)
	if err != nil {
		t.Fatalf("%s: %v", component, err)
	}
	return s, data
}

func clone(t testing.TB, s *specs.Spec) *specs.Spec {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var c specs.Spec
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func i64(v int64) *int64 { return &v }

// components are the seven whose specs Docker 20.10 wrote for the stack (testdata/docker-20.10,
// made on the real engine by e2e's TestShimFixtures), and unmarked the offline world's two.
var (
	components = []string{"launcher", "net", "llm", "kms", "bash", "fs", "agent"}
	unmarked   = []string{"world", "model"}
)

// dockerFixture is what Docker 20.10 wrote for one service of the stack, with the policy hash
// it was captured under replaced by the compiled one (a new manifest changes the hash, not what
// Docker writes).
func dockerFixture(t testing.TB, service string) *specs.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "docker-20.10", service+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(components, service) {
		want, _ := compiled(t, service)
		var s specs.Spec
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		_, captured, _ := Identify(&s)
		data = []byte(strings.ReplaceAll(string(data), captured, want.Annotations[compile.AnnotationPolicy]))
	}
	s, err := LoadSpec(data)
	if err != nil {
		t.Fatalf("%s: %v", service, err)
	}
	return s
}

// fixtureFacts are what this machine would say about a spec where every bind source is what its
// name says: a folder on ext4 (a regular file, root's and only root's to write, for Docker's own
// /etc files and init), and the hook path is dockerd's. The id is the one the spec's cgroup names.
func fixtureFacts(s *specs.Spec) Facts {
	f := Facts{Sources: map[string]Source{}, Programs: map[string]string{}}
	if s.Linux != nil {
		f.ID = strings.TrimPrefix(s.Linux.CgroupsPath, "/docker/")
	}
	for _, m := range s.Mounts {
		if mountKind(m) != "bind" {
			continue
		}
		f.Sources[m.Source] = dockerSource(s, m)
	}
	for _, h := range hookPaths(s) {
		f.Programs[h] = "/usr/sbin/dockerd"
	}
	return f
}

// dockerSource is what this machine says of one bind source of s as Docker 20.10 makes it for
// the stack (measured on the engine, see etcfiles.go): a folder on ext4; Docker's own /etc files
// regular files holding what Docker writes for s's component; an identity volume a tmpfs of its
// own.
func dockerSource(s *specs.Spec, m specs.Mount) Source {
	src := Source{Path: filepath.Clean(m.Source), Type: fs.ModeDir, Perm: 0o755, FS: 0xEF53}
	if _, engine := engineMounts[m.Destination]; engine {
		src.Type = 0
		src.Etc = dockerEtc(s, m.Destination)
	}
	if strings.HasPrefix(m.Destination, compile.IdentityDir+"/") {
		src.MountPoint, src.FS = true, tmpfsMagic
	}
	return src
}

// hostResolv stands for the host's resolv.conf in the facts.
const hostResolv = "nameserver 10.255.255.53\n"

// dockerEtc is what Docker 20.10 has written into a container's /etc file at dest for the
// compiled stack when the runtime creates it (measured): the launcher (network_mode none) has no
// address line; net and the launcher, no dns, the host's resolv.conf; every other component dns
// 0.0.0.0 and that one nameserver (Docker turns it into its embedded resolver's after the create).
func dockerEtc(s *specs.Spec, dest string) *EtcFile {
	hostname := s.Hostname
	component, _, _ := Identify(s)
	switch dest {
	case "/etc/hostname":
		return &EtcFile{Content: hostname + "\n"}
	case "/etc/hosts":
		hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n" +
			"ff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"
		if component != "launcher" {
			hosts += "172.21.0.2\t" + hostname + "\n"
		}
		return &EtcFile{Content: hosts}
	case "/etc/resolv.conf":
		switch component {
		case "launcher", "net", "world", "model":
			return &EtcFile{Content: hostResolv, Host: hostResolv, Engine: &EngineDNS{}}
		}
		return &EtcFile{Content: "nameserver " + noDNS + "\n", Host: hostResolv, Engine: &EngineDNS{DNS: []string{noDNS}}}
	}
	return nil
}

func fields(rs []Reason) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Field)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var allCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_MODULE"}

// TestDockerFixtures: what Docker 20.10 really writes for every component of the stack (with the
// offline world's overlay) passes the shim's check against the compiled spec, once narrowed as
// the shim narrows it, with every engine-owned field as the engine wrote it: its hook, cgroup
// path, overlay root, /etc files and init, sysctl, device rules and resource defaults. The world
// and the model carry no marker.
func TestDockerFixtures(t *testing.T) {
	for _, c := range components {
		t.Run(c, func(t *testing.T) {
			want, _ := compiled(t, c)
			got := dockerFixture(t, c)
			if component, _, marked := Identify(got); !marked || component != c {
				t.Fatalf("the fixture identifies as %q (marked %v)", component, marked)
			}
			Narrow(want, got)
			if rs := Check(want, got, fixtureFacts(got)); len(rs) > 0 {
				t.Errorf("refused what Docker wrote: %v", rs)
			}
		})
	}
	for _, svc := range append(slices.Clone(components), unmarked...) {
		data, err := os.ReadFile(filepath.Join("testdata", "docker-20.10", svc+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := KnownFields(data); err != nil {
			t.Errorf("%s: Docker wrote a field runtime-spec v1.3.0 does not have: %v", svc, err)
		}
	}
	for _, u := range unmarked {
		if _, _, marked := Identify(dockerFixture(t, u)); marked {
			t.Errorf("%s carries a SHarness marker", u)
		}
	}
}

// TestCheck widens what Docker wrote for a component, one field at a time, and wants the shim to
// refuse each widening naming its field (and both values), and to allow what only narrows.
func TestCheck(t *testing.T) {
	type edit func(s *specs.Spec, f *Facts)
	dropNS := func(typ specs.LinuxNamespaceType) edit {
		return func(s *specs.Spec, _ *Facts) {
			s.Linux.Namespaces = slices.DeleteFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == typ })
		}
	}
	mount := func(dest string, fn func(m *specs.Mount)) edit {
		return func(s *specs.Spec, _ *Facts) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == dest {
					fn(&s.Mounts[i])
				}
			}
		}
	}
	// source rebinds dest from src, which the host resolves to what src says.
	source := func(dest, src string, as Source) edit {
		return func(s *specs.Spec, f *Facts) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == dest {
					s.Mounts[i].Source = src
				}
			}
			f.Sources[src] = as
		}
	}
	addMount := func(m specs.Mount) edit {
		return func(s *specs.Spec, f *Facts) {
			s.Mounts = append(s.Mounts, m)
			if mountKind(m) == "bind" {
				f.Sources[m.Source] = Source{Path: m.Source, Type: fs.ModeDir, FS: 0xEF53}
			}
		}
	}
	syscalls := func(fn func(r []specs.LinuxSyscall) []specs.LinuxSyscall) edit {
		return func(s *specs.Spec, _ *Facts) { s.Linux.Seccomp.Syscalls = fn(s.Linux.Seccomp.Syscalls) }
	}
	env := func(kv ...string) edit {
		return func(s *specs.Spec, _ *Facts) { s.Process.Env = append(s.Process.Env, kv...) }
	}
	folder := func(p string) Source { return Source{Path: p, Type: fs.ModeDir, FS: 0xEF53} }
	volumeMount := func(bound bool) edit {
		return func(s *specs.Spec, f *Facts) {
			for _, m := range s.Mounts {
				if m.Destination == "/run/sharness/identity/agent" {
					src := f.Sources[m.Source]
					src.MountPoint, src.Bound, src.FS = true, bound, 0x01021994
					f.Sources[m.Source] = src
				}
			}
		}
	}
	// volumeShaped makes the policy volume at dest what the host finds when a volume's driver
	// options mount something there (measured on Engine 20.10: type overlay gives an overlayfs
	// mount of its own; type none, o bind a bind, Bound; type tmpfs a tmpfs).
	volumeShaped := func(dest string, mountPoint, bound bool, magic int64) edit {
		return func(s *specs.Spec, f *Facts) {
			for _, m := range s.Mounts {
				if m.Destination == dest {
					src := f.Sources[m.Source]
					src.MountPoint, src.Bound, src.FS = mountPoint, bound, magic
					f.Sources[m.Source] = src
				}
			}
		}
	}
	// etc edits what the host read from the Docker /etc file at dest.
	etc := func(dest string, fn func(e *EtcFile)) edit {
		return func(s *specs.Spec, f *Facts) {
			for _, m := range s.Mounts {
				if m.Destination == dest {
					src := f.Sources[m.Source]
					e := *src.Etc
					if e.Engine != nil {
						d := *e.Engine
						e.Engine = &d
					}
					fn(&e)
					src.Etc = &e
					f.Sources[m.Source] = src
				}
			}
		}
	}
	errno0 := uint(0)
	hook := func(s *specs.Spec) specs.Hook {
		//lint:ignore SA1019 what Docker 20.10 writes
		return s.Hooks.Prestart[0]
	}
	tests := []struct {
		name      string
		component string // default agent
		strict    bool
		// production judges the fixture against the default policy's spec, as if the world's
		// compose file ran under it.
		production bool
		edit       edit
		fields     []string // every refused field; nil: allowed
	}{
		{name: "as Docker writes it", edit: func(*specs.Spec, *Facts) {}},
		{name: "narrower is allowed", edit: func(s *specs.Spec, _ *Facts) {
			*s.Linux.Resources.Pids.Limit, *s.Linux.Resources.Memory.Limit = 10, 1<<20
			s.Linux.Seccomp.Syscalls = s.Linux.Seccomp.Syscalls[1:]
			s.Process.Terminal = true
			s.Process.Rlimits[1].Soft = 16
			*s.Process.OOMScoreAdj = 500
			s.Linux.Resources.CPU = &specs.LinuxCPU{Cpus: "0", Quota: i64(50000)}
		}},

		// The widenings a list of refusals let through (issue 16), against the real fixtures.
		{name: "a createRuntime hook", edit: func(s *specs.Spec, f *Facts) {
			s.Hooks.CreateRuntime = []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", "id > /tmp/owned"}}}
		}, fields: []string{"hooks.createRuntime[0]"}},
		{name: "a second prestart hook", edit: func(s *specs.Spec, f *Facts) {
			//lint:ignore SA1019 what Docker 20.10 writes
			s.Hooks.Prestart = append(s.Hooks.Prestart, hook(s))
		}, fields: []string{"hooks.prestart[1]"}},
		{name: "the network hook for another container", edit: func(s *specs.Spec, f *Facts) {
			//lint:ignore SA1019 what Docker 20.10 writes
			s.Hooks.Prestart[0].Args[2] = strings.Repeat("e", 64)
		}, fields: []string{"hooks.prestart[0]"}},
		{name: "the network hook run by another program", edit: func(s *specs.Spec, f *Facts) {
			f.Programs[hook(s).Path] = "/tmp/dockerd-ish"
		}, fields: []string{"hooks.prestart[0]"}},
		{name: "the network hook with environment", edit: func(s *specs.Spec, f *Facts) {
			//lint:ignore SA1019 what Docker 20.10 writes
			s.Hooks.Prestart[0].Env = []string{"LD_PRELOAD=/tmp/x.so"}
		}, fields: []string{"hooks.prestart[0]"}},
		{name: "a poststop hook", edit: func(s *specs.Spec, f *Facts) {
			s.Hooks.Poststop = []specs.Hook{hook(s)}
		}, fields: []string{"hooks.poststop[0]"}},
		{name: "unified cgroup limits", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Resources.Unified = map[string]string{"pids.max": "max", "memory.max": "max"}
		}, fields: []string{"linux.resources.unified"}},
		{name: "systemd properties", edit: func(s *specs.Spec, _ *Facts) {
			s.Annotations = map[string]string{"org.systemd.property.Delegate": "true"}
		}, fields: []string{"annotations[org.systemd.property.Delegate]"}},
		{name: "an extra sysctl", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Sysctl["net.ipv4.ip_forward"] = "1" },
			fields: []string{"linux.sysctl[net.ipv4.ip_forward]"}},
		{name: "the engine's sysctl with another value", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Sysctl["net.ipv4.ip_unprivileged_port_start"] = "1024"
		}, fields: []string{"linux.sysctl[net.ipv4.ip_unprivileged_port_start]"}},
		{name: "ping sockets open", edit: func(s *specs.Spec, _ *Facts) { delete(s.Linux.Sysctl, "net.ipv4.ping_group_range") },
			fields: []string{"linux.sysctl[net.ipv4.ping_group_range]"}},
		{name: "shared root propagation", edit: func(s *specs.Spec, _ *Facts) { s.Linux.RootfsPropagation = "shared" },
			fields: []string{"linux.rootfsPropagation"}},
		{name: "a host network device", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.NetDevices = map[string]specs.LinuxNetDevice{"eth0": {Name: "eth9"}}
		}, fields: []string{"linux.netDevices"}},
		{name: "more open files", edit: func(s *specs.Spec, _ *Facts) {
			for i := range s.Process.Rlimits {
				if s.Process.Rlimits[i].Type == "RLIMIT_NOFILE" {
					s.Process.Rlimits[i].Hard, s.Process.Rlimits[i].Soft = 1<<20, 1<<20
				}
			}
		}, fields: []string{"process.rlimits[RLIMIT_NOFILE]"}},
		{name: "an rlimit the policy does not set", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Hard: ^uint64(0), Soft: ^uint64(0)})
		}, fields: []string{"process.rlimits[RLIMIT_MEMLOCK]"}},
		{name: "core dumps back (rlimit dropped)", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Rlimits = slices.DeleteFunc(s.Process.Rlimits, func(r specs.POSIXRlimit) bool { return r.Type == "RLIMIT_CORE" })
		}, fields: []string{"process.rlimits[RLIMIT_CORE]"}},
		{name: "an rlimit twice, in lower case", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "rlimit_core", Hard: 1 << 30, Soft: 1 << 30})
		}, fields: []string{"process.rlimits[RLIMIT_CORE]"}},
		{name: "spared by the OOM killer", edit: func(s *specs.Spec, _ *Facts) { *s.Process.OOMScoreAdj = -999 },
			fields: []string{"process.oomScoreAdj"}},
		{name: "the OOM score left to the runtime", edit: func(s *specs.Spec, _ *Facts) { s.Process.OOMScoreAdj = nil },
			fields: []string{"process.oomScoreAdj"}},
		{name: "another source and rshared at a listed destination", edit: func(s *specs.Spec, f *Facts) {
			source("/workspace/.claude", "/etc", folder("/etc"))(s, f)
			mount("/workspace/.claude", func(m *specs.Mount) { m.Options = []string{"rbind", "ro", "rshared"} })(s, f)
		}, fields: []string{"mounts[/workspace/.claude]"}},
		{name: "slave propagation on a bind", edit: mount("/workspace", func(m *specs.Mount) { m.Options = append(m.Options, "rslave") }),
			fields: []string{"mounts[/workspace]"}},

		// Mount sources, as the host resolved them.
		{name: "the Docker socket through a symlink at a listed destination", edit: source("/workspace/.claude", "/home/p/project/.claude",
			Source{Path: "/run/docker.sock", Type: fs.ModeSocket, FS: 0x01021994}), fields: []string{"mounts[/workspace/.claude]"}},
		{name: "the Docker socket by another name (same inode)", edit: source("/workspace/.claude", "/srv/sock",
			Source{Path: "/srv/sock", Type: fs.ModeSocket, FS: 0xEF53, Holds: "/var/run/docker.sock"}), fields: []string{"mounts[/workspace/.claude]"}},
		{name: "a folder holding the engine's state by another name", edit: source("/workspace", "/srv/all",
			Source{Path: "/srv/all", Type: fs.ModeDir, FS: 0xEF53, Holds: "/var/lib/docker"}), fields: []string{"mounts[/workspace]"}},
		{name: "another socket", edit: source("/workspace/.claude", "/home/p/agent.sock",
			Source{Path: "/home/p/agent.sock", Type: fs.ModeSocket, FS: 0xEF53}), fields: []string{"mounts[/workspace/.claude]"}},
		{name: "a device", edit: source("/workspace/.zshrc", "/dev/sda", Source{Path: "/dev/sda", Type: fs.ModeDevice, FS: 0x01021994}),
			fields: []string{"mounts[/workspace/.zshrc]"}},
		{name: "the host's /proc", edit: source("/workspace/.claude", "/proc", Source{Path: "/proc", Type: fs.ModeDir, FS: 0x9fa0}),
			fields: []string{"mounts[/workspace/.claude]"}},
		{name: "a folder on procfs by another name", edit: source("/workspace/.claude", "/srv/p", Source{Path: "/srv/p", Type: fs.ModeDir, FS: 0x9fa0}),
			fields: []string{"mounts[/workspace/.claude]"}},
		{name: "a symlink below the workspace", edit: source("/workspace/.claude", "/home/p/ws/.claude",
			Source{Err: "a symbolic link on the way from /home/p/ws, a folder the container may write"}), fields: []string{"mounts[/workspace/.claude]"}},
		{name: "a source the host did not resolve", edit: func(s *specs.Spec, f *Facts) {
			mount("/workspace/.claude", func(m *specs.Mount) { m.Source = "/never/resolved" })(s, f)
		}, fields: []string{"mounts[/workspace/.claude]"}},
		{name: "another role's identity volume", edit: source("/run/sharness/identity/agent", "/var/lib/docker/volumes/sharness-e2e_identity-kms/_data",
			folder("/var/lib/docker/volumes/sharness-e2e_identity-kms/_data")), fields: []string{"mounts[/run/sharness/identity/agent]"}},
		{name: "a host folder for the identity volume", edit: source("/run/sharness/identity/agent", "/tmp/fake",
			folder("/tmp/fake")), fields: []string{"mounts[/run/sharness/identity/agent]"}},
		{name: "the identity volume as compose makes it (a tmpfs of its own)", edit: volumeMount(false)},
		{name: "the identity volume binding a host folder (driver options type none)", edit: volumeMount(true),
			fields: []string{"mounts[/run/sharness/identity/agent]"}},
		// Policy volumes with driver options of their own (issue 16): only a plain local volume, or
		// the tmpfs compose makes an identity volume, passes.
		{name: "the identity volume an overlayfs over a host folder (type overlay)", edit: volumeShaped("/run/sharness/identity/agent", true, false, 0x794C7630),
			fields: []string{"mounts[/run/sharness/identity/agent]"}},
		{name: "the identity volume a plain folder", edit: volumeShaped("/run/sharness/identity/agent", false, false, 0xEF53),
			fields: []string{"mounts[/run/sharness/identity/agent]"}},
		{name: "the identity volume a disk of its own (type ext4)", edit: volumeShaped("/run/sharness/identity/agent", true, false, 0xEF53),
			fields: []string{"mounts[/run/sharness/identity/agent]"}},
		{name: "an audit volume as compose makes it (a plain folder)", component: "net", edit: func(*specs.Spec, *Facts) {}},
		{name: "an audit volume an overlayfs (type overlay)", component: "net", edit: volumeShaped("/var/log/sharness", true, false, 0x794C7630),
			fields: []string{"mounts[/var/log/sharness]"}},
		{name: "an audit volume a tmpfs", component: "net", edit: volumeShaped("/var/log/sharness", true, false, tmpfsMagic),
			fields: []string{"mounts[/var/log/sharness]"}},
		{name: "a gate volume binding a host folder (type none, o bind)", component: "net", edit: volumeShaped("/var/lib/sharness/gate", true, true, 0xEF53),
			fields: []string{"mounts[/var/lib/sharness/gate]"}},

		// What Docker writes into a container's /etc files from settings the spec does not carry
		// (issue 16): extra_hosts, dns, dns_search, dns_opt.
		{name: "extra_hosts on net (an allowlisted name pointed elsewhere)", component: "net",
			edit: etc("/etc/hosts", func(e *EtcFile) { e.Content += "203.0.113.7\tallowed.sharness.test\n" }), fields: []string{"mounts[/etc/hosts]"}},
		{name: "extra_hosts on the agent (net pointed elsewhere)",
			edit: etc("/etc/hosts", func(e *EtcFile) { e.Content = "203.0.113.7\tnet\n" + e.Content }), fields: []string{"mounts[/etc/hosts]"}},
		{name: "a hosts line with an alias beside the hostname",
			edit: etc("/etc/hosts", func(e *EtcFile) { e.Content += "172.21.0.2\tagent llm\n" }), fields: []string{"mounts[/etc/hosts]"}},
		{name: "a hosts file that does not parse",
			edit: etc("/etc/hosts", func(e *EtcFile) { e.Content += "not-an-address agent\n" }), fields: []string{"mounts[/etc/hosts]"}},
		{name: "the hosts file not read", edit: etc("/etc/hosts", func(e *EtcFile) { *e = EtcFile{Err: "read: permission denied"} }),
			fields: []string{"mounts[/etc/hosts]"}},
		{name: "dns on net (a resolver of the caller's)", component: "net", edit: etc("/etc/resolv.conf", func(e *EtcFile) {
			e.Content, e.Engine.DNS = "nameserver 203.0.113.53\n", []string{"203.0.113.53"}
		}), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "dns on net, resolv.conf already the embedded resolver's", component: "net", edit: etc("/etc/resolv.conf", func(e *EtcFile) {
			e.Content, e.Engine.DNS = "nameserver 127.0.0.11\noptions ndots:0\n", []string{"203.0.113.53"}
		}), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "dns 0.0.0.0 on net narrows", component: "net", edit: etc("/etc/resolv.conf", func(e *EtcFile) {
			e.Content, e.Engine.DNS = "nameserver 0.0.0.0\n", []string{noDNS}
		})},
		{name: "a started container's resolv.conf (the embedded resolver's)",
			edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Content = "nameserver 127.0.0.11\noptions ndots:0\n" })},
		{name: "net's resolv.conf not the host's", component: "net",
			edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Content = "nameserver 203.0.113.53\n" }), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "the agent's resolv.conf beyond its dns",
			edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Content += "nameserver 203.0.113.53\n" }), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "the agent's dns removed (the host's resolvers, CVE-2024-29018)",
			edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Engine.DNS = nil }), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "dns on the agent beside 0.0.0.0",
			edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Engine.DNS = append(e.Engine.DNS, "203.0.113.53") }), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "dns_search on net", component: "net", edit: etc("/etc/resolv.conf", func(e *EtcFile) {
			e.Content, e.Engine.Search = "search evil.test\n"+e.Content, []string{"evil.test"}
		}), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "dns_opt on net", component: "net", edit: etc("/etc/resolv.conf", func(e *EtcFile) {
			e.Content, e.Engine.Options = "nameserver 127.0.0.11\noptions use-vc ndots:0\n", []string{"use-vc"}
		}), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "an IPv6 resolver in resolv.conf", component: "net", edit: etc("/etc/resolv.conf", func(e *EtcFile) {
			e.Content, e.Engine.DNS = e.Content+"nameserver 2001:db8::53\n", []string{"2001:db8::53"}
		}), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "the launcher's resolv.conf, the host's copy", component: "launcher", edit: func(*specs.Spec, *Facts) {}},
		{name: "the launcher's resolv.conf, not the host's", component: "launcher",
			edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Content = "nameserver 203.0.113.53\n" }), fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "the engine's DNS settings not read", edit: etc("/etc/resolv.conf", func(e *EtcFile) { e.Engine = nil }),
			fields: []string{"mounts[/etc/resolv.conf]"}},
		{name: "another hostname in /etc/hostname", edit: etc("/etc/hostname", func(e *EtcFile) { e.Content = "net\n" }),
			fields: []string{"mounts[/etc/hostname]"}},
		{name: "a volume at the workspace", edit: source("/workspace", "/var/lib/docker/volumes/sharness-e2e_identity-kms/_data",
			folder("/var/lib/docker/volumes/sharness-e2e_identity-kms/_data")), fields: []string{"mounts[/workspace]"}},
		{name: "another container's hosts file at /etc/hosts", edit: source("/etc/hosts", "/var/lib/docker/containers/"+strings.Repeat("b", 64)+"/hosts",
			Source{Path: "/var/lib/docker/containers/" + strings.Repeat("b", 64) + "/hosts", FS: 0xEF53}), fields: []string{"mounts[/etc/hosts]"}},
		{name: "a writable init", edit: mount("/sbin/docker-init", func(m *specs.Mount) { m.Options = []string{"bind"} }),
			fields: []string{"mounts[/sbin/docker-init]"}},
		{name: "an init anyone may write", edit: func(s *specs.Spec, f *Facts) {
			src := f.Sources["/usr/bin/docker-init"]
			src.Perm, src.UID = 0o777, 1000
			f.Sources["/usr/bin/docker-init"] = src
		}, fields: []string{"mounts[/sbin/docker-init]"}},

		// Mounts as a list.
		{name: "the workspace mounted over its protected paths", edit: func(s *specs.Spec, _ *Facts) {
			i := slices.IndexFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/workspace" })
			s.Mounts = append(s.Mounts, s.Mounts[i])
		}, fields: []string{"mounts[/workspace/.bashrc]", "mounts[/workspace/.claude]", "mounts[/workspace/.envrc]",
			"mounts[/workspace/.git/config]", "mounts[/workspace/.git/hooks]", "mounts[/workspace/.git]", "mounts[/workspace/.idea]",
			"mounts[/workspace/.profile]", "mounts[/workspace/.vscode]", "mounts[/workspace/.zshrc]", "mounts[/workspace]"}},
		{name: "a protected path left out", edit: func(s *specs.Spec, _ *Facts) {
			s.Mounts = slices.DeleteFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/workspace/.git/hooks" })
		}, fields: []string{"mounts[/workspace/.git/hooks]"}},
		{name: "the identity volume left out (nothing above it)", edit: func(s *specs.Spec, _ *Facts) {
			s.Mounts = slices.DeleteFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/run/sharness/identity/agent" })
		}},

		// What the shim refused before the allowlist, on the real fixtures.
		{name: "privileged", edit: func(s *specs.Spec, _ *Facts) {
			c := s.Process.Capabilities
			c.Bounding, c.Effective, c.Permitted = allCaps, allCaps, allCaps
			s.Linux.Seccomp, s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = nil, nil, nil
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Access: "rwm"})
		}, fields: []string{"linux.resources.devices", "linux.seccomp", // the masked paths: Narrow puts them back
			"process.capabilities.bounding", "process.capabilities.effective", "process.capabilities.permitted"}},
		{name: "ambient capability in lower case", component: "bash", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Capabilities.Ambient = []string{"sys_admin"}
		}, fields: []string{"process.capabilities.ambient"}},
		{name: "no capabilities object", edit: func(s *specs.Spec, _ *Facts) { s.Process.Capabilities = nil },
			fields: []string{"process.capabilities"}},
		{name: "network host", edit: dropNS(specs.NetworkNamespace), fields: []string{"linux.namespaces.network"}},
		{name: "network of another container", edit: func(s *specs.Spec, _ *Facts) {
			for i := range s.Linux.Namespaces {
				if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
					s.Linux.Namespaces[i].Path = "/proc/1/ns/net"
				}
			}
		}, fields: []string{"linux.namespaces.network"}},
		// Engine 20.10 runs network_mode: host by joining libnetwork's "default", the host's own.
		{name: "network host as Docker joins it", edit: func(s *specs.Spec, _ *Facts) {
			for i := range s.Linux.Namespaces {
				if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
					s.Linux.Namespaces[i].Path = "/var/run/docker/netns/default"
				}
			}
		}, fields: []string{"linux.namespaces.network"}},
		{name: "a network namespace libnetwork made", edit: func(s *specs.Spec, _ *Facts) {
			for i := range s.Linux.Namespaces {
				if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
					s.Linux.Namespaces[i].Path = "/var/run/docker/netns/5f2c9e0a1b3d"
				}
			}
		}},
		{name: "pid host", edit: dropNS(specs.PIDNamespace), fields: []string{"linux.namespaces.pid"}},
		{name: "ipc host", edit: dropNS(specs.IPCNamespace), fields: []string{"linux.namespaces.ipc"}},
		{name: "uts host", edit: dropNS(specs.UTSNamespace), fields: []string{"linux.namespaces.uts"}},
		{name: "cgroup host", component: "bash", edit: dropNS(specs.CgroupNamespace), fields: []string{"linux.namespaces.cgroup"}},
		{name: "user namespace added", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		}, fields: []string{"linux.namespaces.user"}},
		// A new time namespace is the engine's own (Engine 29's default: TestTimeNamespaceEngine29);
		// joining one is not.
		{name: "time namespace joined", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.TimeNamespace, Path: "/proc/1/ns/time"})
		}, fields: []string{"linux.namespaces.time"}},
		{name: "a namespace twice, the second joined", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: "/proc/1/ns/pid"})
		}, fields: []string{"linux.namespaces.pid"}},
		{name: "docker socket", edit: addMount(specs.Mount{Destination: "/var/run/docker.sock", Type: "bind",
			Source: "/var/run/docker.sock", Options: []string{"rbind", "rprivate"}}), fields: []string{"mounts[/var/run/docker.sock]"}},
		{name: "docker socket at a listed destination", edit: mount("/workspace", func(m *specs.Mount) { m.Source = "/run/docker.sock" }),
			fields: []string{"mounts[/workspace]"}},
		{name: "host path at /host", edit: addMount(specs.Mount{Destination: "/host", Type: "bind", Source: "/", Options: []string{"rbind", "ro"}}),
			fields: []string{"mounts[/host]"}},
		{name: "host /proc over /proc", edit: mount("/proc", func(m *specs.Mount) { m.Type, m.Source, m.Options = "bind", "/proc", []string{"rbind"} }),
			fields: []string{"mounts[/proc]"}},
		{name: "unlisted tmpfs", edit: addMount(specs.Mount{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=1m"}}),
			fields: []string{"mounts[/run/sharness/identity/agent]", "mounts[/run]"}}, // mounted after it, /run covers it
		{name: "read_only false", edit: func(s *specs.Spec, _ *Facts) { s.Root.Readonly = false }, fields: []string{"root.readonly"}},
		{name: "no root", edit: func(s *specs.Spec, _ *Facts) { s.Root = nil }, fields: []string{"root.readonly"}},
		{name: "another root", edit: func(s *specs.Spec, _ *Facts) { s.Root.Path = "/" }, fields: []string{"root.path"}},
		{name: "seccomp unconfined", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Seccomp = nil }, fields: []string{"linux.seccomp"}},
		{name: "seccomp default allow", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Seccomp.DefaultAction = specs.ActAllow },
			fields: []string{"linux.seccomp.defaultAction"}},
		{name: "seccomp default fakes success", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Seccomp.DefaultErrnoRet = &errno0 },
			fields: []string{"linux.seccomp.defaultAction"}},
		{name: "seccomp i386", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Seccomp.Architectures = append(s.Linux.Seccomp.Architectures, specs.ArchX86)
		}, fields: []string{"linux.seccomp.architectures"}},
		{name: "seccomp allows mount", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			return append(r, specs.LinuxSyscall{Names: []string{"mount"}, Action: specs.ActAllow})
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp logs bpf", component: "bash", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			return append(r, specs.LinuxSyscall{Names: []string{"bpf"}, Action: specs.ActLog})
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp: clone without its argument filter", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			for i := range r {
				if slices.Contains(r[i].Names, "clone") {
					r[i].Args = nil
				}
			}
			return r
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp: clone with a second condition on the same argument (runc ORs them)", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			for i := range r {
				if slices.Contains(r[i].Names, "clone") {
					r[i].Args = append(r[i].Args, specs.LinuxSeccompArg{Index: 0, Value: 0x10000000, Op: specs.OpMaskedEqual, ValueTwo: 0x10000000})
				}
			}
			return r
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp: clone with a condition more (narrower)", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			for i := range r {
				if slices.Contains(r[i].Names, "clone") {
					r[i].Args = append(r[i].Args, specs.LinuxSeccompArg{Index: 2, Value: 0, Op: specs.OpEqualTo})
				}
			}
			return r
		})},
		{name: "seccomp: memfd_create without MFD_ALLOW_SEALING", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			return append(r, specs.LinuxSyscall{Names: []string{"memfd_create"}, Action: specs.ActAllow})
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp: memfd_create's denial dropped (the default still denies)", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			return slices.DeleteFunc(r, func(x specs.LinuxSyscall) bool {
				return slices.Contains(x.Names, "memfd_create") && x.Action == specs.ActErrno
			})
		})},
		{name: "seccomp: Landlock faked", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			return append([]specs.LinuxSyscall{{Names: []string{"landlock_restrict_self"}, Action: specs.ActErrno, ErrnoRet: &errno0}}, r...)
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp: ptrace to a tracer", edit: syscalls(func(r []specs.LinuxSyscall) []specs.LinuxSyscall {
			return append(r, specs.LinuxSyscall{Names: []string{"ptrace"}, Action: specs.ActTrace})
		}), fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp: speculation mitigation off", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Seccomp.Flags = []specs.LinuxSeccompFlag{specs.LinuxSeccompFlagSpecAllow}
		}, fields: []string{"linux.seccomp.flags"}},
		{name: "seccomp: a user-space notifier", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Seccomp.ListenerPath = "/run/agent.sock"
		}, fields: []string{"linux.seccomp.listenerPath"}},
		{name: "user root", edit: func(s *specs.Spec, _ *Facts) { s.Process.User = specs.User{} },
			fields: []string{"process.user.gid", "process.user.uid"}},
		{name: "group root added", edit: func(s *specs.Spec, _ *Facts) { s.Process.User.AdditionalGids = []uint32{0} },
			fields: []string{"process.user.additionalGids"}},
		{name: "a umask", edit: func(s *specs.Spec, _ *Facts) { s.Process.User.Umask = new(uint32) }, fields: []string{"process.user.umask"}},
		{name: "no_new_privs false", edit: func(s *specs.Spec, _ *Facts) { s.Process.NoNewPrivileges = false },
			fields: []string{"process.noNewPrivileges"}},
		{name: "apparmor unconfined", edit: func(s *specs.Spec, _ *Facts) { s.Process.ApparmorProfile = "unconfined" },
			fields: []string{"process.apparmorProfile"}},
		{name: "a real-time scheduler", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Scheduler = &specs.Scheduler{Policy: specs.SchedFIFO, Priority: 99}
		}, fields: []string{"process.scheduler"}},
		{name: "a device", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/sda", Type: "b", Major: 8}}
		}, fields: []string{"linux.devices"}},
		{name: "device cgroup rule", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "b", Major: i64(8), Access: "rw"})
		}, fields: []string{"linux.resources.devices"}},
		{name: "device cgroup without its first denial", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Resources.Devices = s.Linux.Resources.Devices[1:]
		}, fields: []string{"linux.resources.devices[0]"}},
		{name: "no pids limit", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Resources.Pids = nil },
			fields: []string{"linux.resources.pids.limit"}},
		{name: "unlimited pids", edit: func(s *specs.Spec, _ *Facts) { *s.Linux.Resources.Pids.Limit = -1 },
			fields: []string{"linux.resources.pids.limit"}},
		{name: "memory above", edit: func(s *specs.Spec, _ *Facts) { *s.Linux.Resources.Memory.Limit = 2 << 30 },
			fields: []string{"linux.resources.memory.limit"}},
		{name: "no memory limit", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Resources.Memory = nil },
			fields: []string{"linux.resources.memory.limit", "linux.resources.memory.swap"}},
		{name: "swap above", edit: func(s *specs.Spec, _ *Facts) { *s.Linux.Resources.Memory.Swap = 2 << 30 },
			fields: []string{"linux.resources.memory.swap"}},
		{name: "no OOM killer", edit: func(s *specs.Spec, _ *Facts) {
			t := true
			s.Linux.Resources.Memory.DisableOOMKiller = &t
		}, fields: []string{"linux.resources.memory.disableOOMKiller"}},
		{name: "real-time CPU time", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.Resources.CPU.RealtimeRuntime = i64(950000)
		}, fields: []string{"linux.resources.cpu.realtimeRuntime"}},
		{name: "a net_cls class a host firewall may trust", edit: func(s *specs.Spec, _ *Facts) {
			id := uint32(0x100001)
			s.Linux.Resources.Network = &specs.LinuxNetwork{ClassID: &id}
		}, fields: []string{"linux.resources.network"}},
		{name: "another cgroup", edit: func(s *specs.Spec, _ *Facts) { s.Linux.CgroupsPath = "/" },
			fields: []string{"linux.cgroupsPath"}},
		{name: "another container's cgroup", edit: func(s *specs.Spec, _ *Facts) { s.Linux.CgroupsPath = "/docker/" + strings.Repeat("c", 64) },
			fields: []string{"linux.cgroupsPath"}},
		{name: "a 32-bit personality", edit: func(s *specs.Spec, _ *Facts) { s.Linux.Personality = &specs.LinuxPersonality{Domain: specs.PerLinux32} },
			fields: []string{"linux.personality"}},
		{name: "an ID-mapped mount", edit: mount("/workspace", func(m *specs.Mount) {
			m.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 0, Size: 1}}
		}), fields: []string{"mounts[/workspace]"}},
		{name: "another spec version", edit: func(s *specs.Spec, _ *Facts) { s.Version = "2.0.0" }, fields: []string{"ociVersion"}},
		{name: "a Windows section", edit: func(s *specs.Spec, _ *Facts) { s.Windows = &specs.Windows{LayerFolders: []string{"C:\\"}} },
			fields: []string{"windows"}},
		{name: "tmpfs without size", edit: mount("/tmp", func(m *specs.Mount) { m.Options = []string{"nosuid", "nodev", "noexec", "mode=1777"} }),
			fields: []string{"mounts[/tmp]"}},
		{name: "tmpfs size=0", edit: mount("/tmp", func(m *specs.Mount) { m.Options = append(m.Options, "size=0") }),
			fields: []string{"mounts[/tmp]"}},
		{name: "tmpfs larger", edit: mount("/tmp", func(m *specs.Mount) { m.Options = append(m.Options, "size=1g") }),
			fields: []string{"mounts[/tmp]"}},
		{name: "tmpfs smaller", edit: mount("/tmp", func(m *specs.Mount) { m.Options = append(m.Options, "size=1m") })},
		{name: "exec again on /tmp (Narrow puts noexec back after it)", edit: mount("/tmp", func(m *specs.Mount) { m.Options = append(m.Options, "exec") })},
		{name: "an unknown mount option", edit: mount("/tmp", func(m *specs.Mount) { m.Options = append(m.Options, "X-mount.idmap=0:0:1") }),
			fields: []string{"mounts[/tmp]"}},
		{name: "writable over read-only", edit: mount("/workspace/.git/hooks", func(m *specs.Mount) { m.Options = []string{"rbind", "ro", "rw"} }),
			fields: []string{"mounts[/workspace/.git/hooks]"}},
		{name: "systempaths unconfined (Narrow puts them back)", edit: func(s *specs.Spec, _ *Facts) {
			s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = s.Linux.MaskedPaths[1:], nil
		}},

		// Environment: switches only as compiled, or within envExceptions.
		{name: "a switch the compiled spec sets otherwise", edit: env("SHARNESS_AI_FS_URL=http://elsewhere:8091"),
			fields: []string{"process.env[SHARNESS_AI_FS_URL]"}},
		{name: "a switch no compiled spec sets", edit: env("SHARNESS_AI_SESSION_LENGTH=720h"),
			fields: []string{"process.env[SHARNESS_AI_SESSION_LENGTH]"}},
		{name: "a switch in lower case", edit: env("sharness_ai_net_resolver=10.0.0.1:53"),
			fields: []string{"process.env[sharness_ai_net_resolver]"}},
		{name: "a switch without a value", edit: env("SHARNESS_AI_POLICY_HASH"), fields: []string{"process.env[SHARNESS_AI_POLICY_HASH]"}},
		{name: "llm's test CA on the agent", edit: env("SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS=-----BEGIN CERTIFICATE-----"),
			fields: []string{"process.env[SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS]"}},
		{name: "the world's CA in llm, under the world's policy", component: "llm", edit: func(*specs.Spec, *Facts) {}},
		{name: "the world's CA in llm, under the world's policy, in strict mode", component: "llm", strict: true, edit: func(*specs.Spec, *Facts) {}},
		{name: "the world's CA in llm, under the default policy", component: "llm", production: true, edit: func(*specs.Spec, *Facts) {},
			fields: []string{"process.env[SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS]"}},
		{name: "the world's CA in llm, not a certificate", component: "llm", edit: env("SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS=/proc/self/environ"),
			fields: []string{"process.env[SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS]"}},
		{name: "the world's CA in net, under the world's policy", component: "net", edit: env("SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS=-----BEGIN CERTIFICATE-----"),
			fields: []string{"process.env[SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS]"}},
		// net takes them from its verified policy: the compiled spec never carries them.
		{name: "the world's old resolver switch in net, under the world's policy", component: "net", edit: env("SHARNESS_AI_NET_RESOLVER=10.214.0.10:53"),
			fields: []string{"process.env[SHARNESS_AI_NET_RESOLVER]"}},
		{name: "the world's old address switch in net, under the world's policy", component: "net", edit: env("SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS=10.214.0.10,10.214.0.11"),
			fields: []string{"process.env[SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS]"}},
		{name: "the world's old address switch in net, under the default policy", component: "net", production: true, edit: env("SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS=169.254.169.254"),
			fields: []string{"process.env[SHARNESS_AI_NET_UNSAFE_ALLOW_ADDR_FOR_TESTS]"}},
		{name: "another resolver for net", component: "net", edit: env("SHARNESS_AI_NET_RESOLVER=203.0.113.7:53"),
			fields: []string{"process.env[SHARNESS_AI_NET_RESOLVER]"}},
		{name: "an upstream proxy for net", component: "net", edit: env("SHARNESS_AI_NET_UPSTREAM_PROXY=http://203.0.113.7:3128"),
			fields: []string{"process.env[SHARNESS_AI_NET_UPSTREAM_PROXY]"}},
		{name: "trust roots from the environment", component: "llm", edit: env("SSL_CERT_FILE=/proc/self/environ"),
			fields: []string{"process.env[SSL_CERT_FILE]"}},
		{name: "GODEBUG", component: "llm", edit: env("GODEBUG=x509negativeserial=1"), fields: []string{"process.env[GODEBUG]"}},
		{name: "a malformed policy hash", edit: env("SHARNESS_AI_POLICY_HASH=anything"), fields: []string{"process.env[SHARNESS_AI_POLICY_HASH]"}},
		{name: "a gate timeout on a component without a gate", edit: env("SHARNESS_AI_GATE_TIMEOUT=1h"),
			fields: []string{"process.env[SHARNESS_AI_GATE_TIMEOUT]"}},
		{name: "a gate timeout on fs", component: "fs", edit: env("SHARNESS_AI_GATE_TIMEOUT=45s")},
		{name: "other variables are the caller's", edit: env("TZ=UTC", "HOME=/tmp")},
		// The proxy and loader variables are switches (found by an attack on the running stack).
		{name: "the agent's proxy elsewhere", edit: env("HTTPS_PROXY=http://elsewhere:3128"), fields: []string{"process.env[HTTPS_PROXY]"}},
		{name: "a proxy for llm", component: "llm", edit: env("https_proxy=http://203.0.113.7:3128"), fields: []string{"process.env[https_proxy]"}},
		{name: "a library preloaded into kms", component: "kms", edit: env("LD_PRELOAD=/workspace/evil.so"), fields: []string{"process.env[LD_PRELOAD]"}},

		// Flags are settings too.
		{name: "net with an upstream proxy by flag", component: "net", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Args = append(s.Process.Args, "-upstream-proxy", "http://203.0.113.7:3128")
		}, fields: []string{"process.args"}},
		{name: "llm without Docker's init", component: "llm", edit: func(s *specs.Spec, _ *Facts) { s.Process.Args = s.Process.Args[2:] }},
		{name: "llm run as another program", component: "llm", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Args = []string{"/sbin/docker-init", "--", "/bin/busybox", "sh"}
		}, fields: []string{"process.args"}},
		{name: "the agent's command is the caller's", edit: func(s *specs.Spec, _ *Facts) {
			s.Process.Args = []string{"/sbin/docker-init", "--", "/usr/local/bin/sharness-claude", "--model", "x"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.component
			if c == "" {
				c = "agent"
			}
			want, _ := compiled(t, c)
			got := dockerFixture(t, c)
			if tt.production {
				world := want.Annotations[compile.AnnotationPolicy]
				want, _ = compiledDefault(t, c)
				got = rehash(t, got, world, want.Annotations[compile.AnnotationPolicy])
			}
			f := fixtureFacts(got)
			f.Strict = tt.strict
			tt.edit(got, &f)
			Narrow(want, got)
			rs := Check(want, got, f)
			if diff := cmp.Diff(tt.fields, fields(rs)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s\nrefusals: %v", diff, rs)
			}
			for _, r := range rs {
				msg := (&Refusal{Component: c, Reasons: []Reason{r}}).Error()
				if r.Want == "" || r.Got == "" || msg != "sharness-runtime: refused "+c+": "+r.Field+": want "+r.Want+" got "+r.Got {
					t.Errorf("refusal %#v does not name both values: %q", r, msg)
				}
			}
		})
	}
}

func TestCheckNil(t *testing.T) {
	agent, _ := compiled(t, "agent")
	for _, c := range [][2]*specs.Spec{{nil, agent}, {agent, nil}, {agent, {}}, {{}, agent}} {
		if len(Check(c[0], c[1], Facts{})) == 0 {
			t.Errorf("Check(%v, %v) allowed an empty spec", c[0] == nil, c[1] == nil)
		}
	}
}

// TestNarrowAddsMountFlags: the compiled nosuid, nodev and noexec reach the engine's mounts that
// lack them (the workspace binds, Docker's /dev), and nothing else changes about them.
func TestNarrowAddsMountFlags(t *testing.T) {
	want, _ := compiled(t, "agent")
	got := dockerFixture(t, "agent")
	if !Narrow(want, got) {
		t.Fatal("Narrow changed nothing in what Docker wrote")
	}
	for _, m := range got.Mounts {
		switch m.Destination {
		case "/workspace", "/workspace/.git", "/workspace/.claude":
			if effective(m.Options)&(flagNosuid|flagNodev|flagNoexec) != flagNosuid|flagNodev|flagNoexec {
				t.Errorf("%s after Narrow: %v, want nosuid,nodev,noexec", m.Destination, m.Options)
			}
		case "/dev":
			if effective(m.Options)&flagNoexec == 0 {
				t.Errorf("/dev after Narrow: %v, want noexec", m.Options)
			}
		case "/sbin/docker-init":
			if effective(m.Options)&flagNoexec != 0 {
				t.Errorf("Docker's init made noexec: %v", m.Options)
			}
		}
	}
	if Narrow(want, got) {
		t.Error("a second Narrow changed something")
	}
	// Check alone refuses what Narrow fixes: it does not rely on the shim having narrowed.
	raw := dockerFixture(t, "agent")
	raw.Linux.MaskedPaths = nil
	if rs := fields(Check(want, raw, fixtureFacts(raw))); !slices.Contains(rs, "linux.maskedPaths") || !slices.Contains(rs, "mounts[/workspace]") {
		t.Errorf("Check of an unnarrowed spec refused %v, want the masked paths and the workspace's noexec", rs)
	}
}

// TestCheckExecArgs: an exec into a component but the agent runs exactly a command its compiled
// spec lists for exec (its health check, compile.AnnotationExec); the agent's are the caller's.
func TestCheckExecArgs(t *testing.T) {
	tests := []struct {
		component string
		args      []string
		policy    func(s *specs.Spec) // the compiled spec, edited
		refused   bool
	}{
		{component: "bash", args: []string{"/sharness-bash", "health"}},
		{component: "fs", args: []string{"/sharness-fs", "health"}},
		{component: "launcher", args: []string{"/sharness-launcher", "health"}},
		{component: "bash", args: []string{"/sharness-bash", "health", "-x"}, refused: true},
		{component: "bash", args: []string{"/sharness-bash"}, refused: true},
		{component: "bash", args: []string{"/bin/busybox", "sh"}, refused: true},
		{component: "net", args: []string{"/sharness-net", "-unsafe-allow-addr-for-tests", "169.254.169.254", "-listen", ":3130"}, refused: true},
		{component: "net", args: []string{"/sharness-net", "health"}, refused: true}, // net has no health check
		{component: "llm", args: []string{"/sharness-llm"}, refused: true},
		{component: "kms", args: []string{"/bin/busybox", "true"}, refused: true},
		{component: "agent", args: []string{"/bin/busybox", "sh"}},
		{component: "agent", args: []string{"/sharness-agent", "-probe"}},
		{component: "bash", args: []string{"/sharness-bash", "health"}, refused: true,
			policy: func(s *specs.Spec) { delete(s.Annotations, compile.AnnotationExec) }},
		{component: "bash", args: []string{"/sharness-bash", "health"}, refused: true,
			policy: func(s *specs.Spec) { s.Annotations[compile.AnnotationExec] = `[["/sharness-bash","health"]] trailing` }},
		{component: "bash", args: []string{"/sharness-bash", "health"}, refused: true,
			policy: func(s *specs.Spec) { s.Annotations[compile.AnnotationExec] = `[["/sharness-bash","health"],[]]` }},
	}
	for _, tt := range tests {
		t.Run(tt.component+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			want, _ := compiled(t, tt.component)
			if tt.policy != nil {
				tt.policy(want)
			}
			p := clone(t, want).Process
			p.Args = tt.args
			rs := CheckProcess(want, p, Facts{})
			if got := slices.Contains(fields(rs), "process.args"); got != tt.refused || len(fields(rs)) > 1 {
				t.Errorf("refused %v, want process.args refused %v: %v", fields(rs), tt.refused, rs)
			}
		})
	}
}

func TestCheckProcess(t *testing.T) {
	agent, _ := compiled(t, "agent")
	tests := []struct {
		name   string
		edit   func(p *specs.Process)
		fields []string
	}{
		{"as compiled", func(*specs.Process) {}, nil},
		{"docker exec -t", func(p *specs.Process) {
			p.Terminal, p.Args, p.ApparmorProfile = true, []string{"sh"}, "docker-default"
		}, nil},
		{"exec --privileged", func(p *specs.Process) {
			p.Capabilities.Bounding, p.Capabilities.Effective, p.Capabilities.Permitted = allCaps, allCaps, allCaps
		}, []string{"process.capabilities.bounding", "process.capabilities.effective", "process.capabilities.permitted"}},
		{"exec -u root", func(p *specs.Process) { p.User = specs.User{} }, []string{"process.user.gid", "process.user.uid"}},
		{"no_new_privs off", func(p *specs.Process) { p.NoNewPrivileges = false }, []string{"process.noNewPrivileges"}},
		{"apparmor unconfined", func(p *specs.Process) { p.ApparmorProfile = "unconfined" }, []string{"process.apparmorProfile"}},
		{"selinux super-privileged", func(p *specs.Process) {
			p.SelinuxLabel = "system_u:system_r:spc_t:s0"
		}, []string{"process.selinuxLabel"}},
		{"runtime default capabilities", func(p *specs.Process) { p.Capabilities = nil }, []string{"process.capabilities"}},
		{"exec -e with a switch", func(p *specs.Process) { p.Env = append(p.Env, "SHARNESS_AI_NET_UPSTREAM_PROXY=http://x:1") },
			[]string{"process.env[SHARNESS_AI_NET_UPSTREAM_PROXY]"}},
		{"exec with more open files", func(p *specs.Process) { p.Rlimits[1].Hard = 1 << 20 }, []string{"process.rlimits[RLIMIT_NOFILE]"}},
		{"exec spared by the OOM killer", func(p *specs.Process) { v := -1000; p.OOMScoreAdj = &v }, []string{"process.oomScoreAdj"}},
		{"exec with a real-time scheduler", func(p *specs.Process) { p.Scheduler = &specs.Scheduler{Policy: specs.SchedRR} },
			[]string{"process.scheduler"}},
		{"an exec's command is the caller's (a health check)", func(p *specs.Process) { p.Args = []string{"/sharness-agent", "health"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := clone(t, agent).Process
			tt.edit(p)
			if diff := cmp.Diff(tt.fields, fields(CheckProcess(agent, p, Facts{}))); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
	if len(CheckProcess(agent, nil, Facts{})) == 0 || len(CheckProcess(nil, agent.Process, Facts{})) == 0 {
		t.Error("a missing process was allowed")
	}
}

func TestCheckResources(t *testing.T) {
	agent, _ := compiled(t, "agent")
	tests := []struct {
		name   string
		r      *specs.LinuxResources
		fields []string
	}{
		{"nothing", nil, nil},
		{"cpu only", &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: new(uint64)}}, nil},
		{"the same limits", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(256)},
			Memory: &specs.LinuxMemory{Limit: i64(1 << 30), Swap: i64(1 << 30)}}, nil},
		{"lower", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(8)}, Memory: &specs.LinuxMemory{Limit: i64(1 << 20)}}, nil},
		// What Docker 20.10 sends for `docker update --pids-limit 100`: the memory fields it does
		// not change as 0, which runc's update leaves as they are (checkLimit).
		{"docker update --pids-limit, lower", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(100)},
			Memory:  dockerUpdateMemory(),
			CPU:     &specs.LinuxCPU{Shares: new(uint64), Quota: i64(0), Period: new(uint64), RealtimeRuntime: i64(0), RealtimePeriod: new(uint64)},
			BlockIO: &specs.LinuxBlockIO{Weight: new(uint16)}}, nil},
		{"a zero pids limit keeps the current one", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(0)}}, nil},
		{"docker update --pids-limit, higher, memory at 0", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(100000)},
			Memory: &specs.LinuxMemory{Limit: i64(0), Swap: i64(0)}}, []string{"linux.resources.pids.limit"}},
		{"memory at 0 and swap removed", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(0), Swap: i64(-1)}},
			[]string{"linux.resources.memory.swap"}},
		{"a negative reservation", &specs.LinuxResources{Memory: &specs.LinuxMemory{Reservation: i64(-1)}},
			[]string{"linux.resources.memory.reservation"}},
		{"pids unlimited", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(-1)}}, []string{"linux.resources.pids.limit"}},
		{"pids above", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(257)}}, []string{"linux.resources.pids.limit"}},
		{"memory removed", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(-1)}}, []string{"linux.resources.memory.limit"}},
		{"memory above", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(1<<30 + 1)}}, []string{"linux.resources.memory.limit"}},
		{"swap unlimited", &specs.LinuxResources{Memory: &specs.LinuxMemory{Swap: i64(-1)}}, []string{"linux.resources.memory.swap"}},
		{"a soft limit above the hard one", &specs.LinuxResources{Memory: &specs.LinuxMemory{Reservation: i64(2 << 30)}},
			[]string{"linux.resources.memory.reservation"}},
		{"kernel memory removed", &specs.LinuxResources{Memory: &specs.LinuxMemory{KernelTCP: i64(-1)}}, []string{"linux.resources.memory.kernelTCP"}},
		{"unified limits lifted", &specs.LinuxResources{Unified: map[string]string{"pids.max": "max"}}, []string{"linux.resources.unified"}},
		{"real-time CPU time", &specs.LinuxResources{CPU: &specs.LinuxCPU{RealtimeRuntime: i64(950000)}}, []string{"linux.resources.cpu.realtimeRuntime"}},
		{"runc's default devices", &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{
			{Allow: false, Access: "rwm"}, {Allow: true, Type: "c", Major: i64(1), Minor: i64(9), Access: "rwm"},
			{Allow: true, Type: "b", Access: "m"}}}, nil},
		{"allow every device", &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}},
			[]string{"linux.resources.devices"}},
		{"allow a disk", &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Type: "b", Major: i64(8), Minor: i64(0), Access: "rw"}}},
			[]string{"linux.resources.devices"}},
		{"allow the tun device", &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: i64(10), Minor: i64(200), Access: "rwm"}}},
			[]string{"linux.resources.devices"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.fields, fields(CheckResources(agent, tt.r))); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnvExceptions holds envExceptions against what the stack really sets: every SHARNESS_AI_
// variable Docker wrote for a component is either in its compiled spec with the same value or
// an exception that allows it there, and every exception is used by some component.
func TestEnvExceptions(t *testing.T) {
	used := map[string]bool{}
	for _, c := range components {
		want, _ := compiled(t, c)
		got := dockerFixture(t, c)
		for _, e := range got.Process.Env {
			name, _, _ := strings.Cut(e, "=")
			switch {
			case !isSwitch(name) || slices.Contains(want.Process.Env, e):
			case envExceptions[name].allows != nil:
				used[name] = true
			default:
				t.Errorf("%s: %s is neither compiled nor an exception", c, name)
			}
		}
		if rs := checkEnv(&comparison{want: want}, "process.env", want.Process.Env, got.Process.Env); len(rs) > 0 {
			t.Errorf("%s: %v", c, rs)
		}
	}
	for name := range envExceptions {
		if !used[name] {
			t.Errorf("exception %s is set by no component of the stack: remove it", name)
		}
	}
}

// dockerUpdateMemory is the memory part Docker 20.10 sends with an update that changes no memory
// limit: every field 0, the kernel-memory ones included.
func dockerUpdateMemory() *specs.LinuxMemory {
	m := &specs.LinuxMemory{Limit: i64(0), Reservation: i64(0), Swap: i64(0), KernelTCP: i64(0)}
	//lint:ignore SA1019 Docker 20.10 still sends it
	m.Kernel = i64(0)
	return m
}
