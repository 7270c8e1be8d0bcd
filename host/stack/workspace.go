package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Workspace is what PrepareWorkspace found and did.
type Workspace struct {
	Protected []string // every protected path of the components that mount the workspace
	Created   []string // those it made
	Warnings  []string // components that will not be able to write the folder
}

// PrepareWorkspace makes the protected paths of m that the workspace folder dir lacks, owned like
// the folder, so that the agent and bash can mount them read-only. An existing one that is a
// symlink or of the wrong type is refused.
func PrepareWorkspace(m *pbp.Manifest, dir string) (Workspace, error) {
	protected, users := workspacePolicy(m)
	if len(users) == 0 {
		return Workspace{}, fmt.Errorf("policy %s mounts no workspace: nothing to prepare", m.Hash)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return Workspace{}, fmt.Errorf("workspace folder: %w (create it first, writable by uid %d)", err, users[0].UID)
	}
	if !st.IsDir() {
		return Workspace{}, fmt.Errorf("workspace %s is not a folder", dir)
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
		return Workspace{}, refused{err}
	}
	w := Workspace{Protected: protected, Created: created}
	for _, c := range users {
		if int(owner.Uid) != c.UID && st.Mode().Perm()&0o002 == 0 {
			w.Warnings = append(w.Warnings, fmt.Sprintf("%s runs as uid %d, and the folder belongs to uid %d and is not writable by others: %s will not be able to write it", c.Name, c.UID, owner.Uid, c.Name))
		}
	}
	return w, nil
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
