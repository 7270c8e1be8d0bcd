package shim

import (
	"path"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The fields the engine owns, each recognised by its exact shape (measured on Docker 20.10:
// testdata/docker-20.10), never taken on trust.

var (
	overlayRoot = regexp.MustCompile(`^/var/lib/docker/overlay2/[0-9a-f]{64}/merged$`)
	// snapshotRoot is where the containerd image store (the default of Engine 29, measured; moby's
	// daemon/snapshotter/mount.go) mounts a container's root: <data root>/rootfs/<snapshotter>/<the
	// container's id>, with containerd's overlayfs snapshotter.
	snapshotRoot = regexp.MustCompile(`^/var/lib/docker/rootfs/overlayfs/([0-9a-f]{64})$`)
	procExe      = regexp.MustCompile(`^/proc/[1-9][0-9]*/exe$`)
	hex12        = regexp.MustCompile(`^[0-9a-f]{12}$`)
)

// checkRootPath: the bundle's own rootfs (a host without Docker), the overlay Docker's overlay2
// storage driver mounted for the container, or the one the containerd image store's overlayfs
// snapshotter mounted for this very container. Another storage driver is refused, not guessed at.
func checkRootPath(c *comparison, field string, want, got string) []Reason {
	if got == want || got == "rootfs" || overlayRoot.MatchString(got) {
		return nil
	}
	if m := snapshotRoot.FindStringSubmatch(got); m != nil && c.facts.ID != "" && m[1] == c.facts.ID {
		return nil
	}
	return []Reason{{Field: field, Want: "rootfs, /var/lib/docker/overlay2/<id>/merged or /var/lib/docker/rootfs/overlayfs/<this container's id>", Got: strconv.Quote(got)}}
}

// checkCgroupsPath: runc's own default (empty: a new cgroup named after the container), or the
// cgroup Docker makes for this container under its parent, by either cgroup driver. Any other
// path could be an existing cgroup, whose processes and limits the container would share, or
// one the compose file's cgroup_parent chose.
func checkCgroupsPath(c *comparison, field string, want, got string) []Reason {
	id := c.facts.ID
	if got == want || got == "" || id != "" && (got == "/docker/"+id || got == "system.slice:docker:"+id) {
		return nil
	}
	return []Reason{{Field: field, Want: "/docker/<this container's id>", Got: strconv.Quote(got)}}
}

// checkRootfsPropagation: shared would let mounts made inside the container appear on the host
// (and the reverse); private and slave, runc's default, do not send any out.
func checkRootfsPropagation(_ *comparison, field string, want, got string) []Reason {
	switch got {
	case want, "", "private", "rprivate", "slave", "rslave":
		return nil
	}
	return []Reason{{Field: field, Want: "private or slave", Got: got}}
}

// checkHooks: a hook is a program runc runs on the host, as root, outside every confinement. The
// compiled hooks are allowed as they are (there are none), and so is exactly one other: the
// network setup Docker 20.10 does in a prestart hook (createRuntime in later engines), dockerd
// re-running itself as `libnetwork-setkey -exec-root=<dir> <this container's id> <its 12-hex
// network controller id>`, with no environment and no timeout, from /proc/<pid>/exe of a process
// that is dockerd.
func checkHooks(c *comparison, _ string, want, got *specs.Hooks) []Reason {
	if got == nil {
		return nil
	}
	if want == nil {
		want = &specs.Hooks{}
	}
	network := false
	var out []Reason
	for _, l := range []struct {
		name      string
		want, got []specs.Hook
		setup     bool // where an engine may put its network setup
	}{
		//lint:ignore SA1019 prestart is what Docker 20.10 writes
		{"prestart", want.Prestart, got.Prestart, true},
		{"createRuntime", want.CreateRuntime, got.CreateRuntime, true},
		{"createContainer", want.CreateContainer, got.CreateContainer, false},
		{"startContainer", want.StartContainer, got.StartContainer, false},
		{"poststart", want.Poststart, got.Poststart, false},
		{"poststop", want.Poststop, got.Poststop, false},
	} {
		for i, h := range l.got {
			switch {
			case len(l.want) > i && reflect.DeepEqual(l.want[i], h):
			case l.setup && !network && c.networkHook(h):
				network = true
			default:
				out = append(out, Reason{Field: "hooks." + l.name + "[" + strconv.Itoa(i) + "]",
					Want: "only the engine's libnetwork-setkey", Got: clip(strings.Join(append([]string{h.Path}, h.Args...), " "))})
			}
		}
	}
	return out
}

func (c *comparison) networkHook(h specs.Hook) bool {
	if !procExe.MatchString(h.Path) || path.Base(c.facts.Programs[h.Path]) != "dockerd" ||
		len(h.Env) > 0 || h.Timeout != nil || len(h.Args) != 4 || c.facts.ID == "" {
		return false
	}
	root, ok := strings.CutPrefix(h.Args[1], "-exec-root=")
	return h.Args[0] == "libnetwork-setkey" && ok && path.IsAbs(root) && path.Clean(root) == root &&
		h.Args[2] == c.facts.ID && hex12.MatchString(h.Args[3])
}
