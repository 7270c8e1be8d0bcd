package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/compose"
)

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
			rows, denied, err := compose.Explain(m, c)
			if err != nil {
				return err
			}
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
