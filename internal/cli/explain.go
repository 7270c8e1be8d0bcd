package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/compose"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// row is one line of an explanation: a policy field, its effective value, and what the compiler
// made of it in the OCI spec and in the compose file.
type row struct {
	Field   string `json:"field"`
	Value   string `json:"value"`
	Spec    string `json:"oci_spec"`
	Compose string `json:"compose"`
}

func (a *app) explainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "explain COMPONENT",
		Short: "Show one component's effective policy and what the compiler made of each field",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			m, err := a.load()
			if err != nil {
				return err
			}
			c := m.Component(args[0])
			if c == nil {
				var names []string
				for _, x := range m.Components {
					names = append(names, x.Name)
				}
				return fmt.Errorf("no component %q in %s (components: %s)", args[0], a.manifest, strings.Join(names, ", "))
			}
			_, oci, err := compile.Seccomp(compile.SeccompInput{Capabilities: c.Capabilities, Allow: c.SyscallAllow, Deny: c.SyscallDeny})
			if err != nil {
				return err
			}
			var denied []string
			for _, r := range oci.Syscalls {
				if r.ErrnoRet != nil && *r.ErrnoRet == 1 {
					denied = append(denied, r.Names...)
				}
			}
			rows := explain(m, c, denied)
			var b strings.Builder
			fmt.Fprintf(&b, "component %s (kind %s) under policy %s\n\n", c.Name, c.Kind, m.Hash)
			tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIELD\tVALUE\tOCI SPEC\tCOMPOSE")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Field, r.Value, r.Spec, r.Compose)
			}
			tw.Flush()
			fmt.Fprintf(&b, "\nsyscalls refused by name with EPERM (%d): %s\nany syscall not in Docker's default answers ENOSYS\n", len(denied), strings.Join(denied, " "))
			return a.print(map[string]any{"component": c.Name, "kind": c.Kind, "policy": m.Hash, "fields": rows, "syscalls_denied": denied}, b.String())
		},
	}
}

func explain(m *pbp.Manifest, c *pbp.Component, denied []string) []row {
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
	rows := []row{
		{"subject.image", c.Image, "(the engine's image)", "image"},
		{"identity.uid/gid", fmt.Sprintf("%d:%d", c.UID, c.GID), "process.user", "user"},
		{"identity.spiffe", c.SPIFFEID, "-", "volume identity-" + c.Name + " at " + compose.IdentityDir + "/" + c.Name},
		{"process.capabilities", caps, "process.capabilities (all five sets)", "cap_drop: [ALL], cap_add"},
		{"process.no_new_privs", "true", "process.noNewPrivileges", "security_opt: no-new-privileges:true"},
		{"process.max_pids", strconv.FormatInt(c.MaxPIDs, 10), "linux.resources.pids.limit", "pids_limit"},
		{"process.max_memory", strconv.FormatInt(c.MaxMemory, 10) + " bytes", "linux.resources.memory.limit (+swap)", "mem_limit, memswap_limit"},
		{"(always)", "read-only root", "root.readonly", "read_only: true"},
		{"(always)", "no core files", "process.rlimits RLIMIT_CORE=0", "ulimits.core: 0"},
		{"(always)", "ping sockets closed", "linux.sysctl net.ipv4.ping_group_range", "sysctls"},
		{"syscalls", fmt.Sprintf("docker-default minus %d, plus %v", len(denied), c.SyscallAllow), "linux.seccomp", "security_opt: seccomp=" + compile.SeccompPath(c.Name)},
	}
	for _, t := range c.Tmpfs {
		rows = append(rows, row{"files.tmpfs " + t.Path, strconv.FormatInt(t.Size, 10) + " bytes", "mounts (tmpfs, noexec, size)", "tmpfs"})
	}
	for _, v := range c.Volumes {
		rows = append(rows, row{"files.volumes " + v.Name, fmt.Sprintf("%s read_only=%v", v.Target, v.ReadOnly), "mounts (bind from " + compile.VolumeRoot + ")", "volumes"})
	}
	rows = append(rows, row{"edges", strings.Join(edges, " "), "linux.namespaces network (new)", nets})
	// Fields the policy records but these artefacts cannot carry: say so rather than imply it.
	if c.MaxRuntime > 0 {
		rows = append(rows, row{"process.max_runtime", strconv.FormatInt(c.MaxRuntime, 10) + " s", "not enforced by the artefacts", "not enforced by the artefacts"})
	}
	if len(c.Protected) > 0 {
		rows = append(rows, row{"files.protected", strings.Join(c.Protected, " "), "not enforced by the artefacts (fs component)", "not enforced by the artefacts (fs component)"})
	}
	return rows
}
