package pbp

import (
	"path"
	"slices"
	"strings"
)

// WorkspaceDir is where a component with files.workspace sees the person's workspace folder.
const WorkspaceDir = "/workspace"

// WorkspaceMount is one bind mount of the person's workspace folder: Rel is "" for the workspace
// itself, else a path inside it.
type WorkspaceMount struct {
	Rel      string
	ReadOnly bool
}

// WorkspaceMounts lists, in mount order, the bind mounts that give c its workspace: the folder
// itself, then, for every kind but fs, each protected path read-only over it. A protected path's
// ancestors inside the workspace (".git" for ".git/hooks/") are first bound onto themselves with the
// workspace's own mode: that makes them mount points, which cannot be renamed. Without it the
// agent could rename ".git" away, with the read-only ".git/hooks" inside it, and make a new one
// (measured). fs gets the folder alone: it is the protected paths' only writer.
func WorkspaceMounts(c *Component) []WorkspaceMount {
	if c.Workspace == "" {
		return nil
	}
	ro := c.Workspace == "ro"
	out := []WorkspaceMount{{Rel: "", ReadOnly: ro}}
	if c.Kind == KindFS {
		return out
	}
	protected := make([]string, 0, len(c.Protected))
	for _, p := range c.Protected {
		protected = append(protected, strings.TrimSuffix(p, "/"))
	}
	var ancestors []string
	for _, p := range protected {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if !slices.Contains(protected, d) && !slices.Contains(ancestors, d) {
				ancestors = append(ancestors, d)
			}
		}
	}
	// Shallower first, so that each mount lands inside the ones before it.
	depthOrder := func(a, b string) int {
		if da, db := strings.Count(a, "/"), strings.Count(b, "/"); da != db {
			return da - db
		}
		return strings.Compare(a, b)
	}
	slices.SortFunc(ancestors, depthOrder)
	slices.SortFunc(protected, depthOrder)
	for _, a := range ancestors {
		out = append(out, WorkspaceMount{Rel: a, ReadOnly: ro})
	}
	for _, p := range protected {
		out = append(out, WorkspaceMount{Rel: p, ReadOnly: true})
	}
	return out
}
