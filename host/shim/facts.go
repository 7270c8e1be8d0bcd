package shim

import (
	"io/fs"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Facts is what the host said about a spec before Check judged it, so that Check stays a pure
// function of its arguments: each bind mount's source as the host resolved it, and the program
// behind each hook. A source or a hook Facts does not describe is refused.
type Facts struct {
	ID       string            // the container's id: runc's, which is the engine's
	Strict   bool              // strict mode (/etc/sharness-ai/strict); test switches follow the compiled spec, not this
	Sources  map[string]Source // by the source string the spec gives
	Programs map[string]string // hook path → the file it runs (readlink), "" when unreadable
}

// Source is a bind mount's source, opened by the host and described from the opened file, not
// from its name: the shim running as root resolves it (host.Facts) the way runc will.
type Source struct {
	Path string // absolute, without symbolic links: what the shim gives runc instead of the name
	Err  string // why it could not be opened (a symbolic link below another source, a missing file…)
	Type fs.FileMode
	Perm fs.FileMode
	UID  uint32
	FS   int64 // statfs f_type
	// MountPoint: the source is the root of a mount of its own (a volume with driver options: the
	// stack's identity volumes are tmpfs; or a bind the host made). Bound: that mount shows a
	// folder of a filesystem mounted elsewhere too (a bind of a host folder, as a volume with
	// `type: none, o: bind` makes one), so its name says nothing about what it holds.
	MountPoint, Bound bool
	// Etc is, for one of Docker's per-container /etc files (<dockerRoot>/containers/<id>/hosts,
	// resolv.conf, hostname), what it holds and the settings Docker wrote it from (etcfiles.go);
	// nil for any other source.
	Etc *EtcFile
	// Holds is the engine's socket or state folder (engineState), or the host view (hostViews),
	// that the source is or holds by device and inode, so that the same folder under another
	// name, or a volume mounted onto it, is seen; "" if none.
	Holds string
}

// bindSources are the sources of got's bind mounts, which the host resolves.
func bindSources(got *specs.Spec) []string {
	var out []string
	for _, m := range got.Mounts {
		if mountKind(m) == "bind" {
			out = append(out, m.Source)
		}
	}
	return out
}

// hookPaths are the programs got's hooks would run.
func hookPaths(got *specs.Spec) []string {
	if got.Hooks == nil {
		return nil
	}
	var out []string
	h := got.Hooks
	//lint:ignore SA1019 prestart is what Docker 20.10 writes
	for _, l := range [][]specs.Hook{h.Prestart, h.CreateRuntime, h.CreateContainer, h.StartContainer, h.Poststart, h.Poststop} {
		for _, x := range l {
			out = append(out, x.Path)
		}
	}
	return out
}

// useResolved points each bind mount of got at its source as the host resolved it, so that runc
// follows no symbolic link the shim did not see. Call it after Check allowed got with f.
func useResolved(got *specs.Spec, f Facts) bool {
	changed := false
	for i, m := range got.Mounts {
		if s, ok := f.Sources[m.Source]; ok && mountKind(m) == "bind" && s.Err == "" && s.Path != m.Source {
			got.Mounts[i].Source = s.Path
			changed = true
		}
	}
	return changed
}
