package shim

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
)

// engineState holds the engine's sockets and state: a container that can reach one of them owns
// the host. A bind of one of them, of a folder above one, or of anything inside one is refused,
// as source or destination, except the per-container files and volumes engineFile names.
var engineState = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/docker",
	"/run/containerd", "/var/run/containerd", "/var/lib/docker", "/var/lib/containerd",
}

// dockerRoot is Docker's data root, where its volumes and per-container files are.
const dockerRoot = "/var/lib/docker"

// engineMounts are the mounts Docker 20.10 adds by itself at destinations no compiled spec lists
// (measured: testdata/docker-20.10): its per-container copies of three /etc files
// (<dockerRoot>/containers/<id>/<name>, this container's) and, for `init: true`, its init,
// read-only.
var engineMounts = map[string]engineMount{
	"/etc/resolv.conf":  {file: true},
	"/etc/hostname":     {file: true},
	"/etc/hosts":        {file: true},
	"/sbin/docker-init": {init: true},
}

type engineMount struct {
	file bool // the source is this container's copy of the file of the same name
	init bool // the source is a root-owned program nobody else may write, mounted read-only
}

// checkMounts decides the mounts one by one (mountAllowed), then as a list: a mount covered by a
// later one at or above its destination is hidden by it (a protected read-only bind under a
// writable workspace mounted after it), and a compiled mount left out under one that is kept
// uncovers what it protected (the workspace kept, its read-only .git/hooks dropped).
func checkMounts(c *comparison, field string, want, got []specs.Mount) []Reason {
	listed := make(map[string]specs.Mount, len(want))
	for _, m := range want {
		listed[path.Clean(m.Destination)] = m
	}
	var out []Reason
	kept := map[string]bool{}
	for i, m := range got {
		dest := path.Clean(m.Destination)
		kept[dest] = true
		if r, ok := c.mountAllowed(listed, m); !ok {
			out = append(out, r)
			continue
		}
		for _, later := range got[i+1:] {
			if l := path.Clean(later.Destination); below(dest, l) {
				out = append(out, Reason{Field: "mounts[" + dest + "]", Want: "not covered by a later mount", Got: "covered by mounts[" + l + "]"})
				break
			}
		}
	}
	for _, w := range want {
		dest := path.Clean(w.Destination)
		if kept[dest] {
			continue
		}
		for _, m := range got {
			if d := path.Clean(m.Destination); d != dest && below(dest, d) {
				out = append(out, Reason{Field: "mounts[" + dest + "]", Want: "mounted over mounts[" + d + "]", Got: "missing"})
				break
			}
		}
	}
	return out
}

// below reports whether p is at or below dir.
func below(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// mountAllowed decides one mount; the zero value (false) refuses. A mount is compared on its
// destination, its kind (a host path or which kernel filesystem), its options (no wider than the
// compiled ones: mountOptions) and, for a bind, its source as the host resolved it (bindSource).
func (c *comparison) mountAllowed(listed map[string]specs.Mount, m specs.Mount) (Reason, bool) {
	dest := path.Clean(m.Destination)
	field := "mounts[" + dest + "]"
	kind := mountKind(m)
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
	if len(m.UIDMappings) > 0 || len(m.GIDMappings) > 0 {
		return Reason{Field: field, Want: "no id-mapped mount", Got: "uidMappings/gidMappings"}, false
	}
	w, ok := listed[dest]
	if !ok {
		e, isEngine := engineMounts[dest]
		switch {
		case isEngine && kind == "bind":
			return c.engineMountAllowed(field, dest, e, m)
		case kind == "bind":
			return Reason{Field: field, Want: "not mounted", Got: "host path " + m.Source}, false
		}
		return Reason{Field: field, Want: "not mounted", Got: kind}, false
	}
	if mountKind(w) != kind {
		return Reason{Field: field, Want: mountKind(w), Got: kind}, false
	}
	if r, ok := mountOptions(field, kind, w.Options, m.Options); !ok {
		return r, false
	}
	if kind != "bind" {
		return Reason{}, true
	}
	return c.bindSource(field, w, m)
}

// engineMountAllowed: one of the mounts Docker adds by itself, from where Docker keeps it.
func (c *comparison) engineMountAllowed(field, dest string, e engineMount, m specs.Mount) (Reason, bool) {
	var want []string // beyond the harmless options, nothing; the init read-only
	if e.init {
		want = []string{"ro"}
	}
	if r, ok := mountOptions(field, "bind", want, m.Options); !ok {
		return r, false
	}
	s, r, ok := c.source(field, m.Source)
	switch {
	case !ok:
		return r, false
	case e.file && (s.Path != path.Join(dockerRoot, "containers", c.facts.ID, path.Base(dest)) || c.facts.ID == "" || s.Type != 0 || s.MountPoint):
		return Reason{Field: field, Want: "this container's own copy (" + path.Join(dockerRoot, "containers", "<id>", path.Base(dest)) + ")",
			Got: "source " + describe(m.Source, s)}, false
	case e.init && (s.Type != 0 || s.UID != 0 || s.Perm&0o022 != 0):
		return Reason{Field: field, Want: "the engine's init, read-only, a file only root may write", Got: "source " + describe(m.Source, s)}, false
	case e.file:
		return checkEtcFile(c.want, field, dest, s) // what Docker wrote into it (etcfiles.go)
	}
	return Reason{}, true
}

// source looks up a bind source in the facts and refuses what any bind source must not be: not
// opened, the engine's state (by name, or by device and inode), neither a folder nor a regular
// file (a socket, a device, a fifo), or on a kernel filesystem (procfs, sysfs, cgroup: a view of
// the host, not a folder of it).
func (c *comparison) source(field, src string) (Source, Reason, bool) {
	s, ok := c.facts.Sources[src]
	switch {
	case !ok:
		return s, Reason{Field: field, Want: "a source the shim resolved", Got: "source " + src + " (not resolved)"}, false
	case s.Err != "":
		return s, Reason{Field: field, Want: "a source the shim can open, with no symbolic link below another mount's source", Got: "source " + src + ": " + s.Err}, false
	}
	if p, bad := touchesEngine(s.Path, true); bad {
		return s, Reason{Field: field, Want: "no engine socket or state", Got: "source " + describe(src, s) + " (" + p + ")"}, false
	}
	if p, bad := touchesHost(s.Path); bad {
		return s, Reason{Field: field, Want: hostViewsWant, Got: "source " + describe(src, s) + " (" + p + ")"}, false
	}
	switch {
	case slices.Contains(engineState, s.Holds):
		return s, Reason{Field: field, Want: "no engine socket or state", Got: "source " + describe(src, s) + " is or holds " + s.Holds}, false
	case s.Holds != "":
		return s, Reason{Field: field, Want: hostViewsWant, Got: "source " + describe(src, s) + " is or holds " + s.Holds}, false
	}
	if s.Type != 0 && s.Type != fs.ModeDir {
		return s, Reason{Field: field, Want: "a folder or a regular file", Got: "source " + describe(src, s) + " (" + typeName(s.Type) + ")"}, false
	}
	if !diskFS[s.FS] {
		return s, Reason{Field: field, Want: "a source on a disk or memory filesystem", Got: "source " + describe(src, s) + fmt.Sprintf(" (filesystem 0x%x)", s.FS)}, false
	}
	return s, Reason{}, true
}

// bindSource decides a bind at a listed destination by what its compiled source is. A volume of
// the policy (compile.VolumeRoot/<name>, compile.IdentityRoot/<role>) must be the compiled
// source itself (a host without an engine) or the Docker volume of that name, and that volume
// must be what compose makes of it (volumeShape): not another role's volume (its identity socket
// would be that role's), and not a volume with driver options of its own (a bind of a host
// folder, an overlayfs over one, a disk). Any other compiled source is a host folder the person
// picks at `up` (the workspace, the manifest, kms's secrets): any host folder, but not the
// engine's volumes or files. Which host folder is not bound yet (issue 16, part 5).
func (c *comparison) bindSource(field string, w, m specs.Mount) (Reason, bool) {
	s, r, ok := c.source(field, m.Source)
	if !ok {
		return r, false
	}
	volume, isVolume := policyVolume(w.Source)
	vol, isDockerVolume := dockerVolume(s.Path)
	switch {
	case isVolume && s.Path == w.Source:
	case isVolume && (!isDockerVolume || !strings.HasSuffix(vol, "_"+volume)):
		return Reason{Field: field, Want: "the volume <project>_" + volume + ", " + volumeShapeText(w.Source),
			Got: "source " + describe(m.Source, s) + mountPointNote(s)}, false
	case isVolume:
		if what, ok := volumeShape(w.Source, s); !ok {
			return Reason{Field: field, Want: "the volume " + vol + ", " + volumeShapeText(w.Source), Got: "source " + describe(m.Source, s) + ": " + what}, false
		}
	case below(s.Path, dockerRoot):
		return Reason{Field: field, Want: "a host folder", Got: "source " + describe(m.Source, s) + " (the engine's)"}, false
	}
	return Reason{}, true
}

// volumeShape: what compose makes of a policy volume, and nothing else. An identity volume
// (compile.IdentityRoot) is a tmpfs of its own (compose/render.go gives it driver options type
// tmpfs), one mount of its own filesystem; every other policy volume (the audit and gate
// volumes) is a plain local volume, a folder of the volume store on its disk, not a mount. The
// local driver mounts whatever its driver options say at the volume's folder: a bind of a host
// folder (type none, o bind), an overlayfs whose lower layer is a host folder (type overlay), a
// disk; each is a mount there, and refused. It returns what the volume is when it refuses.
func volumeShape(compiled string, s Source) (string, bool) {
	tmpfs := strings.HasPrefix(compiled, compile.IdentityRoot+"/")
	switch {
	case s.Bound:
		return "a bind of a host folder (a volume with driver options)", false
	case tmpfs && s.MountPoint && s.FS == tmpfsMagic:
		return "", true
	case tmpfs && s.MountPoint:
		return "a mount of " + fsName(s.FS) + " (a volume with driver options)", false
	case tmpfs:
		return "a plain folder, not a tmpfs of its own", false
	case s.MountPoint:
		return "a mount of its own, of " + fsName(s.FS) + " (a volume with driver options)", false
	}
	return "", true
}

func volumeShapeText(compiled string) string {
	if strings.HasPrefix(compiled, compile.IdentityRoot+"/") {
		return "a tmpfs of its own"
	}
	return "a plain folder of the engine's, not a mount"
}

// tmpfsMagic is statfs's f_type for tmpfs.
const tmpfsMagic = 0x01021994

// fsName names the filesystems a refusal is likeliest to meet, else gives the magic number.
func fsName(magic int64) string {
	switch magic {
	case tmpfsMagic:
		return "tmpfs"
	case 0x794C7630:
		return "overlayfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	}
	return fmt.Sprintf("filesystem 0x%x", magic)
}

// hostViews are the host's kernel and device trees: bound into a container they show the host's
// processes (/proc/1/root is the host's root), its kernel's settings and its devices. A source at
// or below one, or holding one, is refused.
var hostViews = []string{"/proc", "/sys", "/dev"}

const hostViewsWant = "no view of the host's /proc, /sys or /dev"

func touchesHost(p string) (string, bool) {
	for _, v := range hostViews {
		if below(p, v) || p == "/" {
			return p, true
		}
	}
	return "", false
}

// policyVolume is the name of the volume a compiled source stands for, and whether it is one.
func policyVolume(src string) (string, bool) {
	if name, ok := strings.CutPrefix(src, compile.VolumeRoot+"/"); ok && !strings.Contains(name, "/") {
		return name, true
	}
	if role, ok := strings.CutPrefix(src, compile.IdentityRoot+"/"); ok && !strings.Contains(role, "/") {
		return "identity-" + role, true // compose names a role's identity volume so (compose/render.go)
	}
	return "", false
}

// dockerVolume is the name of the Docker volume whose folder p is (<dockerRoot>/volumes/<name>/_data).
func dockerVolume(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, dockerRoot+"/volumes/")
	name, data, _ := strings.Cut(rest, "/")
	return name, ok && name != "" && data == "_data"
}

func mountPointNote(s Source) string {
	if s.Bound {
		return " (a bind of a host folder: a volume with driver options)"
	}
	return ""
}

func describe(src string, s Source) string {
	if s.Path == "" || s.Path == src {
		return src
	}
	return src + " → " + s.Path
}

func typeName(t fs.FileMode) string {
	switch t {
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	case fs.ModeNamedPipe:
		return "a fifo"
	case fs.ModeSymlink:
		return "a symbolic link"
	}
	return "type " + t.String()
}

// diskFS are the filesystems a bind source may live on (statfs magic numbers): ones that hold
// files, not views of the kernel or the host's processes.
var diskFS = map[int64]bool{
	0xEF53: true, 0x58465342: true, 0x9123683E: true, 0x01021994: true, 0x794C7630: true, // ext2-4, xfs, btrfs, tmpfs, overlay
	0x2FC12FC1: true, 0xF2F52010: true, 0x6969: true, 0x65735546: true, 0x01021997: true, // zfs, f2fs, nfs, fuse, 9p
	0x4d44: true, 0x2011BAB0: true, 0xF15F: true, 0xCA451A4E: true, 0xE0F5E1E2: true, // vfat, exfat, ecryptfs, bcachefs, erofs
	0xFF534D42: true, 0xFE534D42: true, 0x00C36400: true, 0x73717368: true, 0x858458F6: true, // cifs, smb2, ceph, squashfs, ramfs
}

// mountOptions refuses options wider than the compiled ones (want): writable over read-only;
// without a restrictive flag the compiled mount has (nosuid, nodev, noexec: Narrow adds what
// compose cannot set); a propagation other than private (a shared or slave mount exchanges
// mounts with the host); a tmpfs larger than the compiled one; and any option neither the
// compiled mount has nor harmless lists.
func mountOptions(field, kind string, want, got []string) (Reason, bool) {
	wf, gf := effective(want), effective(got)
	if wf&flagRO != 0 && gf&flagRO == 0 {
		return Reason{Field: field, Want: "read-only", Got: "writable"}, false
	}
	if lack := wf &^ gf & (flagNosuid | flagNodev | flagNoexec); lack != 0 {
		return Reason{Field: field, Want: "options " + strings.Join(want, ","), Got: "without " + flagText(lack)}, false
	}
	for _, o := range got {
		key, value, hasValue := strings.Cut(o, "=")
		switch {
		case slices.Contains(want, o), harmless[o], (o == "bind" || o == "rbind") && kind == "bind":
		case o == "shared" || o == "rshared" || o == "slave" || o == "rslave":
			return Reason{Field: field, Want: "private propagation", Got: o}, false
		case hasValue && key == "size" && kind == "tmpfs":
			if w, ok := optionValue(want, "size"); !ok || !sizeAtMost(value, w) {
				return Reason{Field: field, Want: "size at most " + w, Got: o}, false
			}
		case hasValue && (key == "mode" || key == "ptmxmode"):
			if w, ok := optionValue(want, key); !ok || !sameOctal(value, w) {
				return Reason{Field: field, Want: key + "=" + w, Got: o}, false
			}
		case hasValue && key == "gid" && kind == "devpts":
			// Docker gives new terminals its tty group (gid=5); a pty's group grants nothing the
			// container's single user does not have.
		default:
			return Reason{Field: field, Want: "options " + strings.Join(want, ","), Got: "option " + o}, false
		}
	}
	return Reason{}, true
}

// harmless options widen nothing: propagation that keeps the mount to itself, access times, and
// the restrictive flags.
var harmless = map[string]bool{
	"private": true, "rprivate": true, "unbindable": true, "runbindable": true,
	"relatime": true, "norelatime": true, "noatime": true, "atime": true, "strictatime": true, "nostrictatime": true,
	"nodiratime": true, "diratime": true,
	"ro": true, "nosuid": true, "nodev": true, "noexec": true,
	"rw": true, "suid": true, "dev": true, "exec": true, // as last written; effective() holds the compiled flags
	// Recursively read-only (runc ≥ 1.1: mount_setattr with AT_RECURSIVE on the mount and every
	// mount below it), which Engine ≥ 25 writes for a read-only bind instead of "ro" when the
	// runtime says it can (measured on Engine 29 with runc 1.4).
	"rro": true,
}

type mountFlag int

const (
	flagRO mountFlag = 1 << iota
	flagNosuid
	flagNodev
	flagNoexec
)

// effective are the restrictive flags a list of options leaves set: the last of each pair wins,
// as in mount(8).
func effective(opts []string) mountFlag {
	var f mountFlag
	pairs := map[string]struct {
		flag mountFlag
		set  bool
	}{"ro": {flagRO, true}, "rro": {flagRO, true}, "rw": {flagRO, false}, "nosuid": {flagNosuid, true}, "suid": {flagNosuid, false},
		"nodev": {flagNodev, true}, "dev": {flagNodev, false}, "noexec": {flagNoexec, true}, "exec": {flagNoexec, false}}
	for _, o := range opts {
		if p, ok := pairs[o]; ok && p.set {
			f |= p.flag
		} else if ok {
			f &^= p.flag
		}
	}
	return f
}

func flagText(f mountFlag) string {
	var out []string
	for _, x := range []struct {
		flag mountFlag
		name string
	}{{flagRO, "ro"}, {flagNosuid, "nosuid"}, {flagNodev, "nodev"}, {flagNoexec, "noexec"}} {
		if f&x.flag != 0 {
			out = append(out, x.name)
		}
	}
	return strings.Join(out, ",")
}

func optionValue(opts []string, key string) (string, bool) {
	v, ok := "", false
	for _, o := range opts {
		if x, found := strings.CutPrefix(o, key+"="); found {
			v, ok = x, true
		}
	}
	return v, ok
}

// sizeAtMost compares two tmpfs sizes (bytes, or k, m, g); a percentage only equals itself.
func sizeAtMost(got, want string) bool {
	g, gok := sizeBytes(got)
	w, wok := sizeBytes(want)
	return gok && wok && g <= w || got == want
}

func sizeBytes(s string) (uint64, bool) {
	mult := uint64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > (1<<63)/mult {
		return 0, false
	}
	return n * mult, true
}

func sameOctal(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 8, 32)
	y, err2 := strconv.ParseUint(b, 8, 32)
	return err1 == nil && err2 == nil && x == y
}

// mountKind is "bind" for a host path, else the filesystem type.
func mountKind(m specs.Mount) string {
	if m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
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
	parts := strings.Split(strings.TrimPrefix(p, dockerRoot+"/"), "/")
	if !strings.HasPrefix(p, dockerRoot+"/") {
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

// hasSize: the last size= is a positive number (size=0 means no limit for tmpfs).
func hasSize(opts []string) bool {
	size, _ := optionValue(opts, "size")
	digits := strings.TrimRight(size, "kKmMgG%")
	n, err := strconv.ParseUint(digits, 10, 64)
	return err == nil && n > 0 && len(size)-len(digits) <= 1
}
