package shim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// compiled reads a component's config.json from the repository's compiled output.
func compiled(t testing.TB, component string) (*specs.Spec, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "compiled", component, "config.json"))
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

// dockerSpec builds what Docker 20.10 writes for the compose service of want: its own bind and
// volume sources, its /etc files and init, a network namespace libnetwork made, more environment,
// its AppArmor profile, runc's default devices in the device cgroup and a prestart hook.
func dockerSpec(t testing.TB, want *specs.Spec) *specs.Spec {
	t.Helper()
	s := clone(t, want)
	s.Annotations = nil // Docker 20.10 does not copy labels into annotations
	s.Process.Env = append(s.Process.Env, "HOSTNAME=agent", "HTTPS_PROXY=http://net:3128", "SHARNESS_AI_POLICY_HASH=")
	s.Process.ApparmorProfile = "docker-default"
	s.Process.Args = append([]string{"/sbin/docker-init", "--"}, s.Process.Args...)
	for i, m := range s.Mounts {
		if m.Type == "bind" {
			s.Mounts[i].Source = strings.Replace(m.Source, "/var/lib/sharness-ai/workspace", "/home/person/project/workspace", 1)
			s.Mounts[i].Options = []string{"rbind", "rprivate"}
			if slices.Contains(m.Options, "ro") {
				s.Mounts[i].Options = append(s.Mounts[i].Options, "ro")
			}
		}
	}
	for _, f := range []string{"resolv.conf", "hostname", "hosts"} {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/etc/" + f, Type: "bind",
			Source: "/var/lib/docker/containers/0123abcd/" + f, Options: []string{"rbind", "rprivate"}})
	}
	s.Mounts = append(s.Mounts,
		specs.Mount{Destination: "/sbin/docker-init", Type: "bind", Source: "/usr/bin/docker-init", Options: []string{"bind", "ro"}})
	for i, n := range s.Linux.Namespaces {
		if n.Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = "/var/run/docker/netns/5f2c9e0a1b3d"
		}
	}
	s.Linux.Resources.Devices = append(s.Linux.Resources.Devices,
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"},
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: i64(136), Access: "rwm"},
		specs.LinuxDeviceCgroup{Allow: true, Type: "c", Access: "m"})
	// Docker 20.10 sets its network up in a prestart hook (libnetwork-setkey).
	//lint:ignore SA1019 the deprecated field is what Docker 20.10 writes
	s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "/proc/42/exe", Args: []string{"libnetwork-setkey"}}}}

	return s
}

func fields(rs []Reason) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Field)
	}
	slices.Sort(out)
	return out
}

var allCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_MODULE"}

func TestCheck(t *testing.T) {
	agent, _ := compiled(t, "agent")
	bash, _ := compiled(t, "bash")
	type edit func(s *specs.Spec)
	dropNS := func(typ specs.LinuxNamespaceType) edit {
		return func(s *specs.Spec) {
			s.Linux.Namespaces = slices.DeleteFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == typ })
		}
	}
	mount := func(dest string, f func(m *specs.Mount)) edit {
		return func(s *specs.Spec) {
			for i := range s.Mounts {
				if s.Mounts[i].Destination == dest {
					f(&s.Mounts[i])
				}
			}
		}
	}
	addMount := func(m specs.Mount) edit { return func(s *specs.Spec) { s.Mounts = append(s.Mounts, m) } }
	tests := []struct {
		name   string
		want   *specs.Spec
		edit   edit
		fields []string // every refused field; nil: allowed
	}{
		{name: "agent as Docker writes it", want: agent, edit: func(*specs.Spec) {}},
		{name: "bash as Docker writes it", want: bash, edit: func(*specs.Spec) {}},
		{name: "a named volume at a listed destination", want: agent, edit: mount("/workspace", func(m *specs.Mount) {
			m.Source = "/var/lib/docker/volumes/project_workspace/_data"
		})},
		{name: "narrower is allowed", want: agent, edit: func(s *specs.Spec) {
			*s.Linux.Resources.Pids.Limit, *s.Linux.Resources.Memory.Limit = 10, 1<<20
			s.Linux.Seccomp.Syscalls = s.Linux.Seccomp.Syscalls[1:]
			s.Process.Terminal = true
		}},
		{name: "privileged", want: agent, edit: func(s *specs.Spec) {
			c := s.Process.Capabilities
			c.Bounding, c.Effective, c.Permitted = allCaps, allCaps, allCaps
			s.Linux.Seccomp, s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = nil, nil, nil
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Access: "rwm"})
		}, fields: []string{"linux.maskedPaths", "linux.readonlyPaths", "linux.resources.devices", "linux.seccomp",
			"process.capabilities.bounding", "process.capabilities.effective", "process.capabilities.permitted"}},
		{name: "cap_add NET_ADMIN", want: agent, edit: func(s *specs.Spec) {
			c := s.Process.Capabilities
			c.Bounding, c.Effective, c.Permitted = []string{"CAP_NET_ADMIN"}, []string{"CAP_NET_ADMIN"}, []string{"CAP_NET_ADMIN"}
		}, fields: []string{"process.capabilities.bounding", "process.capabilities.effective", "process.capabilities.permitted"}},
		{name: "ambient capability in lower case", want: bash, edit: func(s *specs.Spec) {
			s.Process.Capabilities.Ambient = []string{"sys_admin"}
		}, fields: []string{"process.capabilities.ambient"}},
		{name: "network host", want: agent, edit: dropNS(specs.NetworkNamespace), fields: []string{"linux.namespaces.network"}},
		{name: "network of another container", want: agent, edit: func(s *specs.Spec) {
			for i := range s.Linux.Namespaces {
				if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
					s.Linux.Namespaces[i].Path = "/proc/1/ns/net"
				}
			}
		}, fields: []string{"linux.namespaces.network"}},
		// Engine 20.10 runs network_mode: host by joining libnetwork's "default", the host's own.
		{name: "network host as Docker joins it", want: agent, edit: func(s *specs.Spec) {
			for i := range s.Linux.Namespaces {
				if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
					s.Linux.Namespaces[i].Path = "/var/run/docker/netns/default"
				}
			}
		}, fields: []string{"linux.namespaces.network"}},
		{name: "pid host", want: agent, edit: dropNS(specs.PIDNamespace), fields: []string{"linux.namespaces.pid"}},
		{name: "pid joined", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Namespaces[0].Path = "/proc/77/ns/pid"
		}, fields: []string{"linux.namespaces.pid"}},
		{name: "ipc host", want: agent, edit: dropNS(specs.IPCNamespace), fields: []string{"linux.namespaces.ipc"}},
		{name: "uts host", want: agent, edit: dropNS(specs.UTSNamespace), fields: []string{"linux.namespaces.uts"}},
		{name: "cgroup host", want: bash, edit: dropNS(specs.CgroupNamespace), fields: []string{"linux.namespaces.cgroup"}},
		{name: "user namespace added", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		}, fields: []string{"linux.namespaces.user"}},
		{name: "docker socket", want: agent, edit: addMount(specs.Mount{Destination: "/var/run/docker.sock", Type: "bind",
			Source: "/var/run/docker.sock", Options: []string{"rbind", "rprivate"}}), fields: []string{"mounts[/var/run/docker.sock]"}},
		{name: "docker socket at a listed destination", want: agent, edit: mount("/workspace", func(m *specs.Mount) {
			m.Source = "/run/docker.sock"
		}), fields: []string{"mounts[/workspace]"}},
		{name: "host /var/run read-only at a listed destination", want: agent, edit: mount("/workspace/.claude", func(m *specs.Mount) {
			m.Source = "/var/run"
		}), fields: []string{"mounts[/workspace/.claude]"}},
		{name: "containerd state", want: agent, edit: addMount(specs.Mount{Destination: "/c", Type: "bind",
			Source: "/run/containerd/containerd.sock", Options: []string{"rbind", "ro"}}), fields: []string{"mounts[/c]"}},
		{name: "host path at /host", want: agent, edit: addMount(specs.Mount{Destination: "/host", Type: "bind",
			Source: "/", Options: []string{"rbind", "ro"}}), fields: []string{"mounts[/host]"}},
		{name: "host /etc at /etc/hosts", want: agent, edit: mount("/etc/hosts", func(m *specs.Mount) {
			m.Source = "/etc"
		}), fields: []string{"mounts[/etc/hosts]"}},
		{name: "writable init", want: agent, edit: mount("/sbin/docker-init", func(m *specs.Mount) {
			m.Options = []string{"bind"}
		}), fields: []string{"mounts[/sbin/docker-init]"}},
		{name: "host /proc over /proc", want: agent, edit: mount("/proc", func(m *specs.Mount) {
			m.Type, m.Source, m.Options = "bind", "/proc", []string{"rbind"}
		}), fields: []string{"mounts[/proc]"}},
		{name: "unlisted sysfs", want: agent, edit: addMount(specs.Mount{Destination: "/s", Type: "sysfs", Source: "sysfs",
			Options: []string{"ro"}}), fields: []string{"mounts[/s]"}},
		{name: "read_only false", want: agent, edit: func(s *specs.Spec) { s.Root.Readonly = false }, fields: []string{"root.readonly"}},
		{name: "seccomp unconfined", want: agent, edit: func(s *specs.Spec) { s.Linux.Seccomp = nil }, fields: []string{"linux.seccomp"}},
		{name: "seccomp allows mount", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Seccomp.Syscalls[0].Names = append(s.Linux.Seccomp.Syscalls[0].Names, "mount")
		}, fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp logs bpf", want: bash, edit: func(s *specs.Spec) {
			s.Linux.Seccomp.Syscalls = append(s.Linux.Seccomp.Syscalls, specs.LinuxSyscall{Names: []string{"bpf"}, Action: specs.ActLog})
		}, fields: []string{"linux.seccomp.syscalls"}},
		{name: "seccomp default allow", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Seccomp.DefaultAction = specs.ActAllow
		}, fields: []string{"linux.seccomp.defaultAction"}},
		{name: "seccomp i386", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Seccomp.Architectures = append(s.Linux.Seccomp.Architectures, specs.ArchX86)
		}, fields: []string{"linux.seccomp.architectures"}},
		{name: "user root", want: agent, edit: func(s *specs.Spec) { s.Process.User = specs.User{} },
			fields: []string{"process.user.gid", "process.user.uid"}},
		{name: "another uid", want: agent, edit: func(s *specs.Spec) { s.Process.User.UID = 1000 }, fields: []string{"process.user.uid"}},
		{name: "group root added", want: agent, edit: func(s *specs.Spec) { s.Process.User.AdditionalGids = []uint32{0} },
			fields: []string{"process.user.additionalGids"}},
		{name: "no_new_privs false", want: agent, edit: func(s *specs.Spec) { s.Process.NoNewPrivileges = false },
			fields: []string{"process.noNewPrivileges"}},
		{name: "apparmor unconfined", want: agent, edit: func(s *specs.Spec) { s.Process.ApparmorProfile = "unconfined" },
			fields: []string{"process.apparmorProfile"}},
		{name: "no capabilities object", want: agent, edit: func(s *specs.Spec) { s.Process.Capabilities = nil },
			fields: []string{"process.capabilities"}},
		{name: "a device", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/sda", Type: "b", Major: 8}}
		}, fields: []string{"linux.devices"}},
		{name: "device cgroup rule", want: agent, edit: func(s *specs.Spec) {
			s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "b", Major: i64(8), Access: "rw"})
		}, fields: []string{"linux.resources.devices"}},
		{name: "no pids limit", want: agent, edit: func(s *specs.Spec) { s.Linux.Resources.Pids = nil },
			fields: []string{"linux.resources.pids.limit"}},
		{name: "unlimited pids", want: agent, edit: func(s *specs.Spec) { *s.Linux.Resources.Pids.Limit = -1 },
			fields: []string{"linux.resources.pids.limit"}},
		{name: "memory above", want: agent, edit: func(s *specs.Spec) { *s.Linux.Resources.Memory.Limit = 2 << 30 },
			fields: []string{"linux.resources.memory.limit"}},
		{name: "no memory limit", want: agent, edit: func(s *specs.Spec) { s.Linux.Resources.Memory = nil },
			fields: []string{"linux.resources.memory.limit", "linux.resources.memory.swap"}},
		{name: "swap above", want: agent, edit: func(s *specs.Spec) { *s.Linux.Resources.Memory.Swap = 2 << 30 },
			fields: []string{"linux.resources.memory.swap"}},
		{name: "tmpfs without size", want: agent, edit: mount("/tmp", func(m *specs.Mount) {
			m.Options = []string{"nosuid", "nodev", "mode=1777"}
		}), fields: []string{"mounts[/tmp]"}},
		{name: "tmpfs size=0", want: agent, edit: mount("/tmp", func(m *specs.Mount) {
			m.Options = append(m.Options, "size=0")
		}), fields: []string{"mounts[/tmp]"}},
		{name: "unlisted tmpfs", want: agent, edit: addMount(specs.Mount{Destination: "/run", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"size=1m"}}), fields: []string{"mounts[/run]"}},
		{name: "writable over read-only", want: agent, edit: mount("/workspace/.git/hooks", func(m *specs.Mount) {
			m.Options = []string{"rbind", "ro", "rw"}
		}), fields: []string{"mounts[/workspace/.git/hooks]"}},
		{name: "systempaths unconfined", want: agent, edit: func(s *specs.Spec) {
			s.Linux.MaskedPaths, s.Linux.ReadonlyPaths = s.Linux.MaskedPaths[1:], nil
		}, fields: []string{"linux.maskedPaths", "linux.readonlyPaths"}},
		{name: "ping sockets open", want: agent, edit: func(s *specs.Spec) { s.Linux.Sysctl = nil },
			fields: []string{"linux.sysctl[net.ipv4.ping_group_range]"}},
		{name: "no root", want: agent, edit: func(s *specs.Spec) { s.Root = nil }, fields: []string{"root.readonly"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dockerSpec(t, tt.want)
			tt.edit(got)
			rs := Check(tt.want, got)
			if diff := cmp.Diff(tt.fields, fields(rs)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s\nrefusals: %v", diff, rs)
			}
			for _, r := range rs {
				msg := (&Refusal{Component: "agent", Reasons: []Reason{r}}).Error()
				if r.Want == "" || r.Got == "" || msg != "sharness-runtime: refused agent: "+r.Field+": want "+r.Want+" got "+r.Got {
					t.Errorf("refusal %#v does not name both values: %q", r, msg)
				}
			}
		})
	}
}

func TestCheckNil(t *testing.T) {
	agent, _ := compiled(t, "agent")
	for _, c := range [][2]*specs.Spec{{nil, agent}, {agent, nil}, {agent, {}}, {{}, agent}} {
		if len(Check(c[0], c[1])) == 0 {
			t.Errorf("Check(%v, %v) allowed an empty spec", c[0] == nil, c[1] == nil)
		}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := clone(t, agent).Process
			tt.edit(p)
			if diff := cmp.Diff(tt.fields, fields(CheckProcess(agent, p))); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
	if len(CheckProcess(agent, nil)) == 0 || len(CheckProcess(nil, agent.Process)) == 0 {
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
		{"pids unlimited", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(-1)}}, []string{"linux.resources.pids.limit"}},
		{"pids above", &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(257)}}, []string{"linux.resources.pids.limit"}},
		{"memory removed", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(-1)}}, []string{"linux.resources.memory.limit"}},
		{"memory above", &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(1<<30 + 1)}}, []string{"linux.resources.memory.limit"}},
		{"swap unlimited", &specs.LinuxResources{Memory: &specs.LinuxMemory{Swap: i64(-1)}}, []string{"linux.resources.memory.swap"}},
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
