package shim

import (
	"path"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// engineState holds the engine's sockets and state: a container that can reach one of them owns
// the host. A bind of one of them, of a folder above one, or of anything inside one is refused,
// as source or destination, except the per-container files listed in engineFile.
var engineState = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/docker",
	"/run/containerd", "/var/run/containerd", "/var/lib/docker", "/var/lib/containerd",
}

// engineMounts are what Docker 20.10 adds to every container by itself, allowed at their
// destination even when the policy does not list them. The /etc files are per-container copies
// Docker writes (…/containers/<id>/hosts) and mounts writable; /sbin/docker-init is the init
// process `init: true` asks for, mounted read-only.
var engineMounts = map[string]engineMount{
	"/proc":             {kind: "proc"},
	"/dev":              {kind: "tmpfs"},
	"/dev/pts":          {kind: "devpts"},
	"/dev/shm":          {kind: "tmpfs"},
	"/dev/mqueue":       {kind: "mqueue"},
	"/sys":              {kind: "sysfs", readOnly: true},
	"/sys/fs/cgroup":    {kind: "cgroup", readOnly: true},
	"/etc/resolv.conf":  {kind: "bind", file: true},
	"/etc/hostname":     {kind: "bind", file: true},
	"/etc/hosts":        {kind: "bind", file: true},
	"/sbin/docker-init": {kind: "bind", readOnly: true},
}

type engineMount struct {
	kind     string
	readOnly bool // the engine's mount must be read-only
	file     bool // the source is a file of the same name (Docker's per-container copy)
}

// checkMounts refuses each mount of got the policy does not allow, one refusal per mount. What a
// mount is compared on: its destination, its kind (a host path or which kernel filesystem),
// whether it is read-only, and a tmpfs's size. Its source is compared only against the engine's
// state (Docker picks volume and bind sources; the policy's are topology A's), and propagation,
// nosuid, nodev and noexec are not compared (Docker's binds carry none of them).
func checkMounts(want, got []specs.Mount) []Reason {
	listed := make(map[string]specs.Mount, len(want))
	for _, m := range want {
		listed[path.Clean(m.Destination)] = m
	}
	var out []Reason
	for _, m := range got {
		if r, ok := mountAllowed(listed, m); !ok {
			out = append(out, r)
		}
	}
	return out
}

// mountAllowed decides one mount; the zero value (false) refuses.
func mountAllowed(want map[string]specs.Mount, m specs.Mount) (Reason, bool) {
	dest := path.Clean(m.Destination)
	field := "mounts[" + dest + "]"
	got := mountKind(m)
	if !path.IsAbs(dest) {
		return Reason{Field: field, Want: "an absolute destination", Got: m.Destination}, false
	}
	if p, bad := touchesEngine(m.Source, true); bad {
		return Reason{Field: field, Want: "no engine socket or state", Got: "source " + p}, false
	}
	if p, bad := touchesEngine(dest, false); bad {
		return Reason{Field: field, Want: "no engine socket or state", Got: "destination " + p}, false
	}
	if m.Type == "tmpfs" && !hasSize(m.Options) {
		return Reason{Field: field, Want: "tmpfs with size=", Got: "tmpfs without a size"}, false
	}
	w, ok := want[dest]
	if !ok {
		if e, engine := engineMounts[dest]; engine && e.allows(m, dest) {
			return Reason{}, true
		}
		if got == "bind" {
			return Reason{Field: field, Want: "not mounted", Got: "host path " + m.Source}, false
		}
		return Reason{Field: field, Want: "not mounted", Got: got}, false
	}
	if mountKind(w) != got {
		return Reason{Field: field, Want: mountKind(w), Got: got}, false
	}
	if !readOnly(m.Options) && readOnly(w.Options) {
		return Reason{Field: field, Want: "read-only", Got: "writable"}, false
	}
	return Reason{}, true
}

func (e engineMount) allows(m specs.Mount, dest string) bool {
	switch {
	case e.kind == "" || mountKind(m) != e.kind:
		return false
	case e.readOnly && !readOnly(m.Options):
		return false
	case e.file:
		return path.Base(path.Clean(m.Source)) == path.Base(dest)
	}
	return true
}

// mountKind is "bind" for a host path, else the filesystem type.
func mountKind(m specs.Mount) string {
	if m.Type == "bind" || hasOption(m.Options, "bind") || hasOption(m.Options, "rbind") {
		return "bind"
	}
	if m.Type == "cgroup2" {
		return "cgroup"
	}
	return m.Type
}

// touchesEngine reports whether p is or lies inside one of the engine's sockets or state folders,
// or, for a host source, holds one (a bind of /var/run or / carries the socket along). Docker's
// per-container /etc files and named volumes lie inside /var/lib/docker and are allowed as
// sources: a volume is a bind of …/volumes/<name>/_data.
func touchesEngine(p string, source bool) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		return "", false // proc, tmpfs, sysfs…: not a path
	}
	p = path.Clean(p)
	if source && engineFile(p) {
		return "", false
	}
	for _, e := range engineState {
		holds := source && (p == "/" || strings.HasPrefix(e, p+"/"))
		if p == e || holds || strings.HasPrefix(p, e+"/") {
			return p, true
		}
	}
	return "", false
}

// engineFile: /var/lib/docker/containers/<id>/{resolv.conf,hostname,hosts} and
// /var/lib/docker/volumes/<name>/_data (or below it).
func engineFile(p string) bool {
	parts := strings.Split(strings.TrimPrefix(p, "/var/lib/docker/"), "/")
	if !strings.HasPrefix(p, "/var/lib/docker/") {
		return false
	}
	switch {
	case len(parts) == 3 && parts[0] == "containers" && parts[1] != "":
		return parts[2] == "resolv.conf" || parts[2] == "hostname" || parts[2] == "hosts"
	case len(parts) >= 3 && parts[0] == "volumes" && parts[1] != "" && parts[2] == "_data":
		return true
	}
	return false
}

// readOnly: the last of "ro" and "rw" wins, as in mount(8); neither is writable.
func readOnly(opts []string) bool {
	ro := false
	for _, o := range opts {
		switch o {
		case "ro":
			ro = true
		case "rw":
			ro = false
		}
	}
	return ro
}

// hasSize: the last size= is a positive number (size=0 means no limit for tmpfs).
func hasSize(opts []string) bool {
	size := ""
	for _, o := range opts {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			size = v
		}
	}
	digits := strings.TrimRight(size, "kKmMgG%")
	n, err := strconv.ParseUint(digits, 10, 64)
	return err == nil && n > 0 && len(size)-len(digits) <= 1
}

func hasOption(opts []string, o string) bool {
	for _, x := range opts {
		if x == o {
			return true
		}
	}
	return false
}
