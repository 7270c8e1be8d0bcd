package compose

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Row is one line of an explanation: a policy field, its effective value, and what the compiler
// made of it in the OCI spec and in the compose file.
type Row struct {
	Field   string `json:"field"`
	Value   string `json:"value"`
	Spec    string `json:"oci_spec"`
	Compose string `json:"compose"`
}

// Explain lists, for a person, one component's effective policy and what the compiler made of
// each field: the OCI spec field, the compose key, and the syscalls refused by name.
func Explain(m *pbp.Manifest, c *pbp.Component) ([]Row, []string, error) {
	_, oci, err := compile.Seccomp(compile.SeccompInput{Capabilities: c.Capabilities, Allow: c.SyscallAllow, Deny: c.SyscallDeny})
	if err != nil {
		return nil, nil, err
	}
	var denied []string
	for _, r := range oci.Syscalls {
		if r.ErrnoRet != nil && *r.ErrnoRet == 1 {
			denied = append(denied, r.Names...)
		}
	}
	return explainRows(m, c, denied), denied, nil
}

func explainRows(m *pbp.Manifest, c *pbp.Component, denied []string) []Row {
	caps := "none"
	if len(c.Capabilities) > 0 {
		caps = strings.Join(c.Capabilities, " ")
	}
	nets := "network_mode: none"
	var edges []string
	for _, e := range m.Edges {
		if e.From == c.Name || e.To == c.Name {
			edges = append(edges, e.From+"→"+e.To)
		}
	}
	if len(edges) > 0 || c.Egress {
		nets = "networks: one internal network per edge"
		if c.Egress {
			nets += " + egress"
		}
	}
	rows := []Row{
		{"subject.image", c.Image, "(the engine's image)", "image"},
		{"identity.uid/gid", fmt.Sprintf("%d:%d", c.UID, c.GID), "process.user", "user"},
		{"identity.spiffe", c.SPIFFEID, "-", identityText(m, c)},
		{"process.capabilities", caps, "process.capabilities (all five sets)", "cap_drop: [ALL], cap_add"},
		{"process.no_new_privs", "true", "process.noNewPrivileges", "security_opt: no-new-privileges:true"},
		{"process.max_pids", strconv.FormatInt(c.MaxPIDs, 10), "linux.resources.pids.limit", "pids_limit"},
		{"process.max_memory", strconv.FormatInt(c.MaxMemory, 10) + " bytes", "linux.resources.memory.limit (+swap)", "mem_limit, memswap_limit"},
		{"process.landlock", c.Landlock, "annotations " + landlock.Annotation + " (sharness-runtime applies it)", "runtime: sharness"},
		{"process.exec", fmt.Sprintf("%d paths", len(c.Exec)), "annotations " + landlock.Annotation + " exec", "runtime: sharness"},
		{"(always)", "read-only root", "root.readonly", "read_only: true"},
		{"(always)", "no core files", "process.rlimits RLIMIT_CORE=0", "ulimits.core: 0"},
		{"(always)", "ping sockets closed", "linux.sysctl net.ipv4.ping_group_range", "sysctls"},
		{"syscalls", fmt.Sprintf("docker-default minus %d, plus %v", len(denied), c.SyscallAllow), "linux.seccomp", "security_opt: seccomp=" + compile.SeccompPath(c.Name)},
	}
	for _, t := range c.Tmpfs {
		rows = append(rows, Row{"files.tmpfs " + t.Path, strconv.FormatInt(t.Size, 10) + " bytes", "mounts (tmpfs, noexec, size)", "tmpfs"})
	}
	for _, v := range c.Volumes {
		rows = append(rows, Row{"files.volumes " + v.Name, fmt.Sprintf("%s read_only=%v", v.Target, v.ReadOnly), "mounts (bind from " + compile.VolumeRoot + ")", "volumes"})
	}
	rows = append(rows, Row{"edges", strings.Join(edges, " "), "linux.namespaces network (new)", nets})
	// Fields the policy records but these artefacts cannot carry: say so rather than imply it.
	if c.MaxRuntime > 0 {
		rows = append(rows, Row{"process.max_runtime", strconv.FormatInt(c.MaxRuntime, 10) + " s", "not enforced by the artefacts", "not enforced by the artefacts"})
	}
	if name := compile.GateVolume(c); name != "" {
		rows = append(rows, Row{"(gated kind)", "approval gate " + compile.GateDir, "mounts (bind from " + compile.VolumeRoot + "/" + name + ")",
			"volumes " + name + ", environment SHARNESS_AI_OPERATOR_PUBKEY"})
	}
	if c.Workspace != "" {
		rows = append(rows, Row{"files.workspace", c.Workspace, "mounts (bind from " + compile.WorkspaceRoot + ")", "volumes (bind from $SHARNESS_AI_WORKSPACE)"})
	}
	switch {
	case len(c.Protected) == 0:
	case c.Workspace == "":
		rows = append(rows, Row{"files.protected", strings.Join(c.Protected, " "), "none: no workspace is mounted", "none: no workspace is mounted"})
	case c.Kind == pbp.KindFS:
		rows = append(rows, Row{"files.protected", strings.Join(c.Protected, " "), "writable: fs is their only writer, under its rules", "writable: fs is their only writer, under its rules"})
	default:
		rows = append(rows, Row{"files.protected", strings.Join(c.Protected, " "), "mounts (read-only binds; their folders in the workspace bound onto themselves)", "volumes (read-only binds)"})
	}
	return rows
}

// identityText says where the component gets its SVID, as Render decides it.
func identityText(m *pbp.Manifest, c *pbp.Component) string {
	switch {
	case c.Kind == pbp.KindLauncher:
		return "issues every other role's SVID, on a socket in each identity volume"
	case m.Launcher() == nil:
		return "none: the manifest has no launcher"
	}
	return "socket in volume identity-" + c.Name + " at " + IdentityDir + "/" + c.Name
}
