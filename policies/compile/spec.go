// Package compile turns a composed manifest into the artefacts an engine runs: per component an
// OCI runtime spec (config.json) and a seccomp profile in Docker's JSON format.
//
// It is pure and deterministic: the same manifest gives byte-identical output on any machine.
// It does not guarantee that an engine applies what the spec says; the e2e suite and the runtime
// shim check that.
package compile

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Annotations and environment every spec carries.
const (
	AnnotationComponent = "ai.sharness.component"
	AnnotationPolicy    = "ai.sharness.policy"
	AnnotationKind      = "ai.sharness.kind"
	// AnnotationCodeSHA256 is subject.code_sha256, when the policy pins it: the runtime shim
	// refuses a container whose entrypoint's binary has another hash.
	AnnotationCodeSHA256 = "ai.sharness.code-sha256"
	// AnnotationNetworks lists, comma-separated, the networks the component joins by their compose
	// names (pbp.Manifest.Networks): the runtime shim refuses a container on any other.
	AnnotationNetworks = "ai.sharness.networks"
	// AnnotationExec is the JSON list of the only commands (each an argv) the runtime shim lets
	// an exec run in a component that is not an app: its health check (HealthCommand), so that
	// `docker exec` cannot start a second instance of the component with flags of its own.
	AnnotationExec = "ai.sharness.exec"
	// AnnotationHealth is the JSON argv of the component's health check (HealthCommand), the
	// agent's included: the runtime shim refuses a container the engine would not health-check
	// with it at least every second, since each check is an exec at which the shim sees a network
	// connected since the start (docs/architecture.md, "The runtime shim").
	AnnotationHealth = "ai.sharness.health"
)

// VolumeRoot is where a host engine without named volumes (topology A) keeps them.
const VolumeRoot = "/var/lib/sharness-ai/volumes"

// WorkspaceRoot is the person's workspace folder on such a host, and WorkspaceMount where a
// component sees it.
const (
	WorkspaceRoot  = "/var/lib/sharness-ai/workspace"
	WorkspaceMount = pbp.WorkspaceDir
)

// Where every component finds the manifest (read-only), its identity socket's folder, and, for
// kms, the sealed secrets (read-only). The compose renderer mounts the same destinations.
const (
	PolicyMount  = "/etc/sharness/policy"
	IdentityDir  = "/run/sharness/identity"
	SecretsMount = "/etc/sharness/secrets"
	// AuditDir is where every component but an app keeps its audit log (internal/audit), on a
	// volume of its own that outlives the stack; GateDir is where a gated component (fs, bash,
	// net, kms) exchanges approval requests and decisions with the host (internal/gate), on a
	// volume of its own that no other container mounts.
	AuditDir = "/var/log/sharness"
	GateDir  = "/var/lib/sharness/gate"
	// PolicyRoot, IdentityRoot and SecretsRoot are their sources on a host without an engine's
	// volumes (topology A).
	PolicyRoot   = "/etc/sharness-ai/policy"
	IdentityRoot = "/run/sharness-ai/identity"
	SecretsRoot  = "/var/lib/sharness-ai/secrets"
)

// SpecOpt is one decision the compiler makes about a spec.
type SpecOpt func(*specs.Spec) error

// Spec builds the OCI runtime spec of one component.
func Spec(m *pbp.Manifest, c *pbp.Component, seccomp *specs.LinuxSeccomp) (*specs.Spec, error) {
	s := &specs.Spec{Version: specs.Version}
	for _, opt := range []SpecOpt{
		withRoot, withProcess(m, c), withMounts(c), withSessionMounts(m, c), withNamespaces,
		withResources(c), withHardening(c), withSeccomp(seccomp), withAnnotations(m, c), withLandlock(m, c), withTestWorld(m, c),
	} {
		if err := opt(s); err != nil {
			return nil, fmt.Errorf("component %s: %w", c.Name, err)
		}
	}
	return s, nil
}

// withRoot: the root filesystem is always read-only.
func withRoot(s *specs.Spec) error {
	s.Root = &specs.Root{Path: "rootfs", Readonly: true}
	return nil
}

func withProcess(m *pbp.Manifest, c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		if c.UID == 0 || c.GID == 0 {
			return fmt.Errorf("uid/gid 0 is refused: components run as non-root")
		}
		args := c.Entrypoint
		if len(args) == 0 {
			args = []string{"/sharness-" + string(c.Kind)}
		}
		caps := append([]string{}, c.Capabilities...)
		s.Hostname = c.Name
		s.Process = &specs.Process{
			User: specs.User{UID: uint32(c.UID), GID: uint32(c.GID)},
			Args: args,
			Env: append([]string{
				"PATH=/usr/local/bin:/usr/bin:/bin",
				"SHARNESS_AI_COMPONENT=" + c.Name,
				"SHARNESS_AI_POLICY=" + m.Hash,
			}, EdgeEnv(m, c)...),
			Cwd: "/",
			// Every set holds only what the policy names. Components run as non-root, for whom a
			// capability survives the execve of the entrypoint (and of the engine's init and the
			// Landlock helper before it) only in the ambient set, which needs it inheritable too:
			// without them a granted capability (kms's CAP_IPC_LOCK) would be gone by the time the
			// component runs. No compose key sets ambient, so the runtime shim adds these two sets
			// from this spec (host/shim Grant). With no capability, all five are empty.
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps, Inheritable: caps, Ambient: caps,
			},
			NoNewPrivileges: true,
			// Explicit: unset, runc leaves the container the OOM score of whatever starts it.
			OOMScoreAdj: new(int),
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0}, // no core files: they would hold memory
				{Type: "RLIMIT_NOFILE", Hard: Files(c), Soft: Files(c)},
			},
		}
		return nil
	}
}

// Files is c's file limit (RLIMIT_NOFILE): 1024, and 4096 for net, whose tunnels each hold two
// sockets and two pipes (images/net limits.files counts what its caps let it hold, and net
// refuses to start over its limit).
func Files(c *pbp.Component) uint64 {
	if c.Kind == pbp.KindNet {
		return 4096
	}
	return 1024
}

// EdgeEnv is where a component finds the bash and fs it has edges to (SHARNESS_AI_BASH_MCP,
// SHARNESS_AI_FS_URL, SHARNESS_AI_FS_MCP), as NAME=value, sorted. The compiled spec carries it,
// so that the runtime shim holds the compose file (compose/render.go sets the same) to it.
func EdgeEnv(m *pbp.Manifest, c *pbp.Component) []string {
	var env, direct []string
	proxied := false
	for _, e := range m.Edges {
		to := m.Component(e.To)
		if e.From == c.Name && to != nil && to.Kind != pbp.KindNet {
			direct = append(direct, to.Name)
		}
		switch {
		case e.From != c.Name || to == nil:
		case to.Kind == pbp.KindNet && c.Kind != pbp.KindLLM:
			// A caller of net reaches the outside world through it, as every HTTP client
			// expects; the variables are switches (a proxy of the compose file's choosing), so
			// the compiled spec carries them and the shim refuses any other value. llm is the
			// exception: it tunnels through net's mutual-TLS port only.
			proxy := fmt.Sprintf("http://%s:%d", to.Name, ProxyPort)
			for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
				env = append(env, k+"="+proxy)
			}
			proxied = true
		case to.Kind == pbp.KindBash:
			env = append(env, fmt.Sprintf("SHARNESS_AI_BASH_MCP=http://%s:%d/mcp", to.Name, BashPort))
		case to.Kind == pbp.KindFS:
			env = append(env, fmt.Sprintf("SHARNESS_AI_FS_URL=http://%s:%d", to.Name, FSPort),
				fmt.Sprintf("SHARNESS_AI_FS_MCP=http://%s:%d/mcp", to.Name, FSPort))
		}
	}
	if proxied && len(direct) > 0 {
		// The component's other edges are reached directly: through net they would be refused.
		slices.Sort(direct)
		env = append(env, "NO_PROXY="+strings.Join(direct, ","), "no_proxy="+strings.Join(direct, ","))
	}
	slices.Sort(env)
	return env
}

func withMounts(c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		// runc's defaults, each as narrow as it allows.
		s.Mounts = []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "noexec", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		}
		for _, t := range c.Tmpfs {
			if t.Size <= 0 {
				return fmt.Errorf("tmpfs %s has no size", t.Path)
			}
			s.Mounts = append(s.Mounts, specs.Mount{
				Destination: t.Path, Type: "tmpfs", Source: "tmpfs",
				Options: []string{"nosuid", "nodev", "noexec", "mode=1777", "size=" + strconv.FormatInt(t.Size, 10)},
			})
		}
		for _, v := range c.Volumes {
			mode := "rw"
			if v.ReadOnly {
				mode = "ro"
			}
			s.Mounts = append(s.Mounts, specs.Mount{
				Destination: v.Target, Type: "bind", Source: VolumeRoot + "/" + v.Name,
				Options: []string{"rbind", "nosuid", "nodev", "noexec", mode},
			})
		}
		for _, w := range pbp.WorkspaceMounts(c) {
			mode := "rw"
			if w.ReadOnly {
				mode = "ro"
			}
			// bind, not rbind: each protected path is its own mount, after the workspace's.
			s.Mounts = append(s.Mounts, specs.Mount{
				Destination: path.Join(WorkspaceMount, w.Rel), Type: "bind", Source: path.Join(WorkspaceRoot, w.Rel),
				Options: []string{"bind", "nosuid", "nodev", "noexec", mode},
			})
		}
		return nil
	}
}

// withSessionMounts: the manifest, read-only, in every component (internal/session checks its
// hash); the role's identity folder, read-only, where the manifest has a launcher, which mounts
// every other role's, writable; kms's sealed secrets, read-only.
func withSessionMounts(m *pbp.Manifest, c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		ro := []string{"rbind", "nosuid", "nodev", "noexec", "ro"}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: PolicyMount, Type: "bind", Source: PolicyRoot, Options: ro})
		switch launcher := m.Launcher(); {
		case launcher == nil:
		case c == launcher:
			for _, o := range m.Components {
				if o != c {
					s.Mounts = append(s.Mounts, specs.Mount{Destination: IdentityDir + "/" + o.Name, Type: "bind",
						Source: IdentityRoot + "/" + o.Name, Options: []string{"rbind", "nosuid", "nodev", "noexec", "rw"}})
				}
			}
		default:
			s.Mounts = append(s.Mounts, specs.Mount{Destination: IdentityDir + "/" + c.Name, Type: "bind",
				Source: IdentityRoot + "/" + c.Name, Options: ro})
		}
		if c.Kind == pbp.KindKMS {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: SecretsMount, Type: "bind", Source: SecretsRoot, Options: ro})
		}
		rw := []string{"rbind", "nosuid", "nodev", "noexec", "rw"}
		if name := AuditVolume(c); name != "" {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: AuditDir, Type: "bind", Source: VolumeRoot + "/" + name, Options: rw})
		}
		if name := GateVolume(c); name != "" {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: GateDir, Type: "bind", Source: VolumeRoot + "/" + name, Options: rw})
		}
		return nil
	}
}

// AuditVolume names the volume of c's audit log: every component but an app (the agent holds no
// decision worth recording, and must not hold the record) has one. "" for none.
func AuditVolume(c *pbp.Component) string {
	if c.Kind == pbp.KindApp {
		return ""
	}
	return "audit-" + c.Name
}

// GateVolume names the volume where c exchanges approvals with the host (internal/gate,
// docs/gate.md): each kind that may put an action to a person has one, whatever its policy asks
// today: fs (business.fs.ask paths), bash (the admin profile; the server's alone, hidden from
// its sandboxes), net (ask hosts) and kms (seal_to, export orders). "" for none.
func GateVolume(c *pbp.Component) string {
	switch c.Kind {
	case pbp.KindFS, pbp.KindBash, pbp.KindNet, pbp.KindKMS:
		return "gate-" + c.Name
	}
	return ""
}

// withNamespaces: every namespace is new; no path means no host namespace is joined.
func withNamespaces(s *specs.Spec) error {
	ensureLinux(s).Namespaces = []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
	}
	return nil
}

func withResources(c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		if c.MaxPIDs <= 0 || c.MaxMemory <= 0 {
			return fmt.Errorf("pids and memory limits are required")
		}
		mem, pids := c.MaxMemory, c.MaxPIDs
		ensureLinux(s).Resources = &specs.LinuxResources{
			// No device may be opened beyond the defaults runc always creates.
			Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			Memory:  &specs.LinuxMemory{Limit: &mem, Swap: &mem},
			Pids:    &specs.LinuxPids{Limit: &pids},
		}
		return nil
	}
}

// withHardening masks and write-protects the kernel interfaces runc's defaults do, and closes
// ICMP ping sockets (they need no capability unless the group range is empty). bash is the one
// exception to the masks: its sandboxes mount a /proc of their own, which the kernel refuses in a
// user namespace while any of the container's /proc is covered (measured); the bash server has no
// capabilities, and the unmasked files are root's.
func withHardening(c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		l := ensureLinux(s)
		l.Devices = []specs.LinuxDevice{}
		l.Sysctl = map[string]string{"net.ipv4.ping_group_range": "1 0"}
		if c.Kind == pbp.KindBash {
			return nil
		}
		hardenProc(l)
		return nil
	}
}

func hardenProc(l *specs.Linux) {
	l.MaskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats",
		"/sys/devices/virtual/powercap", "/sys/firmware",
	}
	l.ReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

func withSeccomp(sc *specs.LinuxSeccomp) SpecOpt {
	return func(s *specs.Spec) error {
		if sc == nil {
			return fmt.Errorf("no seccomp profile: every component needs one")
		}
		ensureLinux(s).Seccomp = sc
		return nil
	}
}

func withAnnotations(m *pbp.Manifest, c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		s.Annotations = map[string]string{
			AnnotationComponent: c.Name, AnnotationPolicy: m.Hash, AnnotationKind: string(c.Kind),
			AnnotationNetworks: strings.Join(m.Networks(c), ","),
		}
		if c.CodeSHA256 != "" {
			if len(c.Entrypoint) == 0 {
				return fmt.Errorf("subject.code_sha256 pins the entrypoint's binary, and there is no subject.entrypoint")
			}
			s.Annotations[AnnotationCodeSHA256] = c.CodeSHA256
		}
		if c.Kind != pbp.KindApp {
			s.Annotations[AnnotationExec] = ExecCommands(m, c)
		}
		if h := HealthCommand(m, c); h != nil {
			b, _ := json.Marshal(h) // a list of strings always encodes
			s.Annotations[AnnotationHealth] = string(b)
		}
		return nil
	}
}

// HealthCommand is the argv of a component's health check, which the compose file gives Docker
// (compose/render.go) and the runtime shim lets an exec run (AnnotationExec), or nil for a
// component without one. bash and fs serve /healthz on the loopback and their binary asks it
// (internal/healthz); the launcher's binary checks its sockets. Every other component with a
// container-wide Landlock domain (net, llm, kms, the agent) runs the Landlock helper's own check
// (landlock.HealthArg): that the container's domain can be entered by an exec.
func HealthCommand(m *pbp.Manifest, c *pbp.Component) []string {
	switch {
	case (c.Kind == pbp.KindBash || c.Kind == pbp.KindFS) && len(c.Entrypoint) > 0:
		return []string{c.Entrypoint[0], "health"}
	case c == m.Launcher():
		return []string{"/sharness-launcher", "health"}
	case c.Landlock != "" && c.Landlock != landlock.PerCommand:
		return []string{landlock.HelperPath, landlock.HealthArg}
	}
	return nil
}

// ExecCommands is AnnotationExec's value: the JSON list of HealthCommand, or [] when there is
// none. Its encoding is the standard library's: the shim decodes it strictly.
func ExecCommands(m *pbp.Manifest, c *pbp.Component) string {
	list := [][]string{}
	if h := HealthCommand(m, c); h != nil {
		list = append(list, h)
	}
	b, _ := json.Marshal(list) // a list of lists of strings always encodes
	return string(b)
}

func ensureLinux(s *specs.Spec) *specs.Linux {
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	return s.Linux
}
