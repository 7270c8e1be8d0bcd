package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/policies/pbp"
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
			protected, users := workspacePolicy(m)
			if len(users) == 0 {
				return fmt.Errorf("policy %s mounts no workspace: nothing to prepare", m.Hash)
			}
			st, err := os.Stat(dir)
			if err != nil {
				return fmt.Errorf("workspace folder: %w (create it first, writable by uid %d)", err, users[0].UID)
			}
			if !st.IsDir() {
				return fmt.Errorf("workspace %s is not a folder", dir)
			}
			created, err := guard.Prepare(dir, protected)
			// What was made belongs to whoever owns the folder, as if they had made it.
			owner := st.Sys().(*syscall.Stat_t)
			for _, p := range created {
				if cerr := os.Lchown(filepath.Join(dir, p), int(owner.Uid), int(owner.Gid)); cerr != nil && err == nil {
					err = fmt.Errorf("give %s to the folder's owner: %w", p, cerr)
				}
			}
			if err != nil {
				return refused{err}
			}
			var notes []string
			for _, c := range users {
				if int(owner.Uid) != c.UID && st.Mode().Perm()&0o002 == 0 {
					notes = append(notes, fmt.Sprintf("%s runs as uid %d, and the folder belongs to uid %d and is not writable by others: %s will not be able to write it", c.Name, c.UID, owner.Uid, c.Name))
				}
			}
			text := fmt.Sprintf("workspace %s: %d protected paths, %d made: %s\n", dir, len(protected), len(created), strings.Join(created, " "))
			for _, n := range notes {
				text += "warning: " + n + "\n"
			}
			return a.print(map[string]any{"workspace": dir, "protected": protected, "created": created, "warnings": notes}, text)
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", envOr("SHARNESS_AI_WORKSPACE", "workspace"), "the workspace folder (env SHARNESS_AI_WORKSPACE)")
	c.AddCommand(initCmd)
	return c
}

// workspacePolicy returns every protected path of the components that mount the workspace, and
// those components.
func workspacePolicy(m *pbp.Manifest) (protected []string, users []*pbp.Component) {
	for _, c := range m.Components {
		if c.Workspace == "" {
			continue
		}
		users = append(users, c)
		protected = append(protected, c.Protected...)
	}
	slices.Sort(protected)
	return slices.Compact(protected), users
}
