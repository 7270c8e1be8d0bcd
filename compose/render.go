// Package compose renders a composed manifest as a Docker Compose file (topology B): one service
// per component with the same settings as its OCI spec, one internal network per allowed edge,
// and the egress network for net alone.
//
// It is pure (bytes out, no engine calls). It does not guarantee that an engine honours what the
// file asks for; the e2e suite and the runtime shim check that.
package compose

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Labels every service and network carries.
const (
	LabelComponent = "ai.sharness.component"
	LabelPolicy    = "ai.sharness.policy"
	LabelKind      = "ai.sharness.kind"
)

// IdentityDir is where each role's identity volume (its SPIFFE Workload API socket) is mounted.
const IdentityDir = compile.IdentityDir

// EgressNetwork is the only network that is not internal; only kind net joins it.
const EgressNetwork = pbp.EgressNetwork

// Options tune the rendering.
type Options struct {
	Project    string // compose project name
	Runtime    string // "sharness" adds runtime: sharness to every service (the shim); "" leaves the engine default
	SeccompDir string // path of the compiled artefacts as the compose file refers to them, e.g. "./compiled"
	PolicyDir  string // the manifest's folder as the compose file refers to it, e.g. "./policies/default"
}

// PolicyMount is where every container finds the manifest's folder, read-only (internal/session).
const PolicyMount = compile.PolicyMount

// The person supplies the policy's hash, or pins the key whose signature they trust, from the
// environment of docker compose; every component refuses to start with neither, or with a
// manifest that matches neither (internal/session).
const (
	suppliedHash = "${SHARNESS_AI_POLICY_HASH:-}"
	suppliedKey  = "${SHARNESS_AI_POLICY_KEY:-}"
)

// The ports components listen on inside the stack (docs/architecture.md, "The wall").
const (
	ProxyPort = compile.ProxyPort
	LLMPort   = compile.LLMPort
	KMSPort   = compile.KMSPort
	BashPort  = compile.BashPort
	FSPort    = compile.FSPort
)

// The person's workspace folder: ./workspace unless SHARNESS_AI_WORKSPACE names another. It and
// every protected path in it must exist before the stack starts (`sharness-ai workspace init`):
// the binds never create a missing source, so a missing one stops the container instead of
// leaving a path unprotected.
const (
	WorkspaceMount  = compile.WorkspaceMount
	workspaceSource = "${SHARNESS_AI_WORKSPACE:-./workspace}"
)

// PlaceholderAPIKey is the only API key a caller of llm is given: llm drops it and adds the real
// one, which exists only sealed on disk, inside kms, and in llm for one request.
const PlaceholderAPIKey = "sharness-placeholder-not-a-key"

// SecretsMount is where kms finds the sealed secrets (sharness-ai secret seal writes them), read
// only; the folder on the host is ./secrets unless SHARNESS_AI_SECRETS_DIR names another.
const (
	SecretsMount  = compile.SecretsMount
	secretsSource = "${SHARNESS_AI_SECRETS_DIR:-./secrets}"
)

// NoDNS is the only upstream resolver the stack's containers are given, net excepted. Docker's embedded
// resolver forwards names it does not know to the container's configured servers; on Engine
// before 26.0.0 it forwarded from the host's namespace when the server is on the host's
// loopback (CVE-2024-29018). 0.0.0.0 is not loopback to that check, so any forwarding happens
// inside the container's own namespace, which on an internal network reaches nothing.
const NoDNS = "0.0.0.0"

// Render returns the compose file for m.
func Render(m *pbp.Manifest, opt Options) ([]byte, error) {
	p := &types.Project{
		Name:     opt.Project,
		Services: types.Services{},
		Networks: types.Networks{},
		Volumes:  types.Volumes{},
	}
	launcher := m.Launcher()
	for i, e := range m.Edges {
		subnet, err := m.EdgeSubnet(i)
		if err != nil {
			return nil, err
		}
		p.Networks[EdgeNetwork(e)] = types.NetworkConfig{
			// The gateway named, so that every engine keeps it from containers: Engine 29 allocates
			// no gateway for an internal network with inhibit_ipv4 unless one is named, and gives
			// its address to the first container (measured; docs/engines.md). It is on no host
			// interface either way (inhibit_ipv4).
			Ipam:     types.IPAMConfig{Config: []*types.IPAMPool{{Subnet: subnet.String(), Gateway: subnet.Addr().Next().String()}}},
			Driver:   "bridge",
			Internal: true,
			// No host-side address on the bridge: an internal network otherwise still lets its
			// containers reach the host's services through the gateway (measured on Engine 20.10).
			DriverOpts: types.Options{"com.docker.network.bridge.inhibit_ipv4": "true"},
			Labels:     types.Labels{LabelPolicy: m.Hash, "ai.sharness.edge": e.From + "-" + e.To},
		}
	}
	for _, c := range m.Components {
		if c.Egress {
			p.Networks[EgressNetwork] = types.NetworkConfig{Driver: "bridge", Labels: types.Labels{LabelPolicy: m.Hash}}
		}
		s, err := service(m, c, opt, launcher)
		if err != nil {
			return nil, err
		}
		p.Services[c.Name] = s
		if launcher != nil && c != launcher {
			// In memory, owned by the launcher, reachable by the role's group alone: the socket
			// is the role's identity, and its keys never touch a disk.
			p.Volumes[identityVolume(c.Name)] = types.VolumeConfig{
				Driver: "local",
				DriverOpts: types.Options{"type": "tmpfs", "device": "tmpfs",
					"o": fmt.Sprintf("size=1m,uid=%d,gid=%d,mode=0750", launcher.UID, c.GID)},
				Labels: types.Labels{LabelPolicy: m.Hash, LabelComponent: c.Name},
			}
		}
		for _, v := range c.Volumes {
			p.Volumes[v.Name] = types.VolumeConfig{Labels: types.Labels{LabelPolicy: m.Hash}}
		}
		// On disk, kept by `docker compose down` without -v: the record outlives the stack.
		for _, name := range []string{compile.AuditVolume(c), compile.GateVolume(c)} {
			if name != "" {
				p.Volumes[name] = types.VolumeConfig{Labels: types.Labels{LabelPolicy: m.Hash, LabelComponent: c.Name}}
			}
		}
	}
	for name, s := range fixtureServices(m, opt) {
		p.Services[name] = s
	}
	out, err := p.MarshalYAML()
	if err != nil {
		return nil, fmt.Errorf("render compose file: %w", err)
	}
	header := "# Generated by sharness-ai compile from policy " + m.Hash + ". Do not edit:\n" +
		"# change the manifest, recompile, and supply the new hash.\n"
	return append([]byte(header), out...), nil
}

// EdgeNetwork names the internal network of one edge.
func EdgeNetwork(e pbp.Edge) string { return pbp.EdgeNetwork(e) }

func identityVolume(role string) string { return "identity-" + role }

func service(m *pbp.Manifest, c *pbp.Component, opt Options, launcher *pbp.Component) (types.ServiceConfig, error) {
	s := types.ServiceConfig{Name: c.Name, Restart: types.RestartPolicyNo}
	s.Image = c.Image
	if len(c.Entrypoint) > 0 {
		s.Entrypoint = types.ShellCommand(c.Entrypoint)
	}
	s.User = strconv.Itoa(c.UID) + ":" + strconv.Itoa(c.GID)
	s.ReadOnly = true
	s.CapDrop = []string{"ALL"}
	s.CapAdd = c.Capabilities
	s.SecurityOpt = []string{"no-new-privileges:true", "seccomp=" + path.Join(opt.SeccompDir, c.Name, "seccomp.json")}
	s.PidsLimit = c.MaxPIDs
	s.MemLimit = types.UnitBytes(c.MaxMemory)
	s.MemSwapLimit = types.UnitBytes(c.MaxMemory) // no swap beyond the memory limit
	s.Ulimits = map[string]*types.UlimitsConfig{"core": {Single: 0, Soft: 0, Hard: 0}, "nofile": {Soft: int(compile.Files(c)), Hard: int(compile.Files(c))}}
	s.Hostname = c.Name
	// A cgroup namespace of its own, as the OCI spec says, also where the engine's default is the
	// host's (cgroup v1).
	s.Cgroup = "private"
	// An init process as PID 1 reaps what the component leaves behind; without it, a Go program
	// whose main thread seccomp killed (an i386/x32 syscall) leaves a container Engine 20.10
	// cannot remove.
	initProcess := true
	s.Init = &initProcess
	s.Runtime = opt.Runtime
	s.Labels = types.Labels{LabelComponent: c.Name, LabelPolicy: m.Hash, LabelKind: string(c.Kind)}
	s.Environment = types.MappingWithEquals{
		"SHARNESS_AI_COMPONENT":   ptr(c.Name),
		"SHARNESS_AI_POLICY":      ptr(m.Hash),
		"SHARNESS_AI_POLICY_HASH": ptr(suppliedHash),
		"SHARNESS_AI_POLICY_KEY":  ptr(suppliedKey),
	}
	if opt.PolicyDir != "" {
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "bind", Source: opt.PolicyDir, Target: PolicyMount, ReadOnly: true})
	}
	for _, e := range m.Edges {
		to := m.Component(e.To)
		switch {
		case e.From != c.Name:
		case to.Kind == pbp.KindLLM:
			// What every Anthropic client reads: the model API is llm, and the key is a
			// placeholder llm throws away.
			s.Environment["ANTHROPIC_BASE_URL"] = ptr(fmt.Sprintf("http://%s:%d", to.Name, LLMPort))
			s.Environment["ANTHROPIC_API_KEY"] = ptr(PlaceholderAPIKey)
		}
	}
	// Where its bash and fs listen, and net's proxy for a caller of net: the compiled spec
	// carries the same, and the runtime shim refuses any other value.
	for _, kv := range compile.EdgeEnv(m, c) {
		k, v, _ := strings.Cut(kv, "=")
		s.Environment[k] = ptr(v)
	}
	if c.Kind == pbp.KindKMS {
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "bind", Source: secretsSource, Target: SecretsMount,
			ReadOnly: true}) // compose creates a missing host folder (create_host_path defaults to true)
		// No memlock ulimit: raising it needs CAP_SYS_RESOURCE in the engine, which some hosts
		// (this project's CI among them) do not give, and then no container starts. kms's policy
		// grants CAP_IPC_LOCK instead (cap_add above), which lifts the limit for mlockall; the
		// runtime shim makes it ambient, as the compiled spec has it (host/shim Grant).
	}
	for _, w := range pbp.WorkspaceMounts(c) {
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "bind", Source: path.Join(workspaceSource, w.Rel),
			Target: path.Join(WorkspaceMount, w.Rel), ReadOnly: w.ReadOnly, Bind: &types.ServiceVolumeBind{CreateHostPath: false}})
	}
	for _, e := range m.Edges {
		// A caller of bash or fs starts once they answer: its first command would fail otherwise.
		if to := m.Component(e.To); e.From == c.Name && (to.Kind == pbp.KindBash || to.Kind == pbp.KindFS) {
			if s.DependsOn == nil {
				s.DependsOn = types.DependsOnConfig{}
			}
			s.DependsOn[to.Name] = types.ServiceDependency{Condition: types.ServiceConditionHealthy, Required: true}
		}
	}
	// The same command the compiled spec lets an exec run (compile.AnnotationExec): any other
	// exec into the component is refused by the runtime shim.
	// The Landlock helper's check needs the helper, which only the runtime shim binds.
	if h := compile.HealthCommand(m, c); h != nil && (h[0] != landlock.HelperPath || opt.Runtime == "sharness") {
		s.HealthCheck = healthCheck(h)
	}
	if c.Kind == pbp.KindBash {
		// The sandboxes mount their own /proc; the kernel refuses that while parts of the
		// container's /proc are masked (measured), so bash alone runs with them unmasked. The
		// server has no capabilities, and those files are root's.
		s.SecurityOpt = append(s.SecurityOpt, "systempaths=unconfined")
	}
	for _, t := range c.Tmpfs {
		s.Tmpfs = append(s.Tmpfs, fmt.Sprintf("%s:rw,noexec,nosuid,nodev,size=%d,mode=1777", t.Path, t.Size))
	}
	switch {
	case launcher == nil:
	case c == launcher:
		// The launcher serves every role's socket, so it alone mounts every identity volume.
		for _, o := range m.Components {
			if o != c {
				s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "volume", Source: identityVolume(o.Name), Target: IdentityDir + "/" + o.Name})
			}
		}
	default:
		s.Environment["SPIFFE_ENDPOINT_SOCKET"] = ptr("unix://" + IdentityDir + "/" + c.Name + "/agent.sock")
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "volume", Source: identityVolume(c.Name), Target: IdentityDir + "/" + c.Name, ReadOnly: true})
		if s.DependsOn == nil {
			s.DependsOn = types.DependsOnConfig{}
		}
		s.DependsOn[launcher.Name] = types.ServiceDependency{Condition: types.ServiceConditionHealthy, Required: true}
	}
	for _, v := range c.Volumes {
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "volume", Source: v.Name, Target: v.Target, ReadOnly: v.ReadOnly})
	}
	// The image holds both folders, owned by the component's user: a new volume takes them over.
	if name := compile.AuditVolume(c); name != "" {
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "volume", Source: name, Target: compile.AuditDir})
	}
	if name := compile.GateVolume(c); name != "" {
		s.Volumes = append(s.Volumes, types.ServiceVolumeConfig{Type: "volume", Source: name, Target: compile.GateDir})
		// The operator's public key: approvals it did not sign are refused; without it, nothing
		// that needs approval is done (sharness-ai operator init prints it). How long an action
		// waits for the person: empty is the component's default (2m).
		s.Environment["SHARNESS_AI_OPERATOR_PUBKEY"] = ptr("${SHARNESS_AI_OPERATOR_PUBKEY:-}")
		s.Environment["SHARNESS_AI_GATE_TIMEOUT"] = ptr("${SHARNESS_AI_GATE_TIMEOUT:-}")
	}
	sort.SliceStable(s.Volumes, func(i, j int) bool { return s.Volumes[i].Target < s.Volumes[j].Target })
	nets := map[string]*types.ServiceNetworkConfig{}
	for _, n := range m.Networks(c) { // the list the compiled spec carries, for the runtime shim
		nets[n] = nil
	}
	switch {
	case len(nets) == 0:
		s.NetworkMode = "none"
	case c.Egress:
		// net resolves the names it is asked for: through the engine's resolver, which forwards
		// to the host's, from the one network that is not internal (or, under a test world's
		// policy, through its test_world.resolver).
		s.Networks = nets
	default:
		s.Networks = nets
		s.DNS = types.StringList{NoDNS}
	}
	// ICMP "ping" sockets need no capability; an empty group range closes them.
	s.Sysctls = types.Mapping{"net.ipv4.ping_group_range": "1 0"}
	return s, nil
}

// healthCheck runs argv (compile.HealthCommand) every second, for up to 30 tries.
func healthCheck(argv []string) *types.HealthCheckConfig {
	interval, timeout := types.Duration(time.Second), types.Duration(3*time.Second)
	retries := uint64(30)
	return &types.HealthCheckConfig{Test: append(types.HealthCheckTest{"CMD"}, argv...),
		Interval: &interval, Timeout: &timeout, Retries: &retries}
}

func ptr(s string) *string { return &s }
