package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/stack"
)

func (a *app) workspaceCmd() *cobra.Command {
	c := &cobra.Command{Use: "workspace", Short: "Prepare the workspace folder the stack mounts at /workspace"}
	var dir string
	initCmd := &cobra.Command{
		Use: "init",
		Short: "Make the policy's protected paths that the workspace lacks (owned like the folder), so that the agent " +
			"and bash can mount them read-only; exit 1 if an existing one is a symlink or of the wrong type",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			m, err := a.load()
			if err != nil {
				return err
			}
			w, err := stack.PrepareWorkspace(m, dir)
			if err != nil {
				return err
			}
			text := fmt.Sprintf("workspace %s: %d protected paths, %d made: %s\n", dir, len(w.Protected), len(w.Created), strings.Join(w.Created, " "))
			for _, n := range w.Warnings {
				text += "warning: " + n + "\n"
			}
			return a.print(map[string]any{"workspace": dir, "protected": w.Protected, "created": w.Created, "warnings": w.Warnings}, text)
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", envOr("SHARNESS_AI_WORKSPACE", "workspace"), "the workspace folder (env SHARNESS_AI_WORKSPACE)")
	c.AddCommand(initCmd)
	return c
}
