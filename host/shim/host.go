package shim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/host/shim/restrict"
	"github.com/sharness-ai/sharness/host/shim/runc"
)

const (
	maxFile  = 8 << 20 // config.json, process.json, resources
	maxStdin = 1 << 20 // the default pipe-max-size: what a pipe can hold
	// maxCode caps the binary HashInRoot reads: Claude Code's is about 200 MiB.
	maxCode = 1 << 30
)

// osHost is the machine as the decision sees it.
type osHost struct {
	ctx  context.Context
	runc string
}

func (osHost) ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f, maxFile, path)
}

func (osHost) ReadStdin() ([]byte, error) { return readCapped(os.Stdin, maxStdin, "stdin") }

func readCapped(r io.Reader, limit int64, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: larger than %d bytes", name, limit)
	}
	return data, nil
}

func (osHost) LandlockABI() int { return restrict.ABI() }

func (osHost) HashInRoot(root, path string) (string, error) {
	dir, err := os.Open(root)
	if err != nil {
		return "", fmt.Errorf("open root %s: %w", root, err)
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), path, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return "", fmt.Errorf("open %s in %s: %w", path, root, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxCode+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read %s: %w", path, err)
	case n > maxCode:
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxCode)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func (osHost) Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (h osHost) Bundle(root, id string) (string, error) { return runc.Bundle(h.ctx, h.runc, root, id) }

// Resolve opens each bind source the way runc will find it, as root on the host, and describes
// the file it opened (fstat, fstatfs, statx's mount id, /proc/self/fd's name for it), not the
// name it was given: a symbolic link to the Docker socket is the socket. A source below another
// source of the list (the workspace's protected paths below the workspace) is opened from that
// folder's descriptor without following any symbolic link (openat2 RESOLVE_NO_SYMLINKS and
// RESOLVE_BENEATH): the folder is the container's to write, and a link planted there (a cloned
// repository's .claude pointing at /, or at a file the agent may write) would move the protected
// bind somewhere else. The shim then hands runc the resolved names (useResolved), so runc follows
// no link the shim did not see.
//
// What this does not close: runc mounts by name, later. Someone who can rename a folder on a
// resolved name between this check and runc's mount (milliseconds) can put another file there.
// Inside the stack's own containers the folders on those names are mount points, which cannot be
// renamed; outside, that is the person, root, or fs writing the workspace on the agent's behalf.
// Handing runc the opened file instead is not possible with runc 1.1: a bind from
// /proc/<pid>/fd/<n> of the shim's descriptor fails with EINVAL in runc's new mount namespace
// (measured: the mount belongs to another namespace), also for an open_tree(2) clone.
func (osHost) Resolve(sources, hooks []string) (map[string]Source, map[string]string) {
	guarded := guardedInodes()
	out := map[string]Source{}
	fds := map[string]int{} // clean name → descriptor, for the sources below it
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	order := slices.Clone(sources)
	slices.SortFunc(order, func(a, b string) int { return len(filepath.Clean(a)) - len(filepath.Clean(b)) })
	for _, src := range order {
		if _, done := out[src]; done {
			continue
		}
		s, fd := resolve(src, fds)
		if fd >= 0 {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil {
				s.Holds = guarded[inode{st.Dev, st.Ino}]
			}
			if _, dup := fds[filepath.Clean(src)]; dup {
				unix.Close(fd)
			} else {
				fds[filepath.Clean(src)] = fd
			}
		}
		out[src] = s
	}
	programs := map[string]string{}
	for _, h := range hooks {
		target, _ := os.Readlink(h)
		// A dockerd whose binary an upgrade replaced still runs: /proc/<pid>/exe says so.
		programs[h] = strings.TrimSuffix(target, " (deleted)")
	}
	return out, programs
}

type inode struct{ dev, ino uint64 }

// guardedInodes maps the device and inode of every engine state path (engineState) and host view
// (hostViews), and of every folder above one, to that path: a source with one of them is, or
// holds, it, whatever its name.
func guardedInodes() map[inode]string {
	out := map[inode]string{}
	for _, p := range slices.Concat(engineState, hostViews) {
		for q := p; ; q = filepath.Dir(q) {
			var st unix.Stat_t
			if unix.Stat(q, &st) == nil {
				if _, ok := out[inode{st.Dev, st.Ino}]; !ok {
					out[inode{st.Dev, st.Ino}] = p
				}
			}
			if q == "/" {
				break
			}
		}
	}
	return out
}

// resolve opens one source (O_PATH) and describes it; the descriptor is -1 when it failed.
func resolve(src string, below map[string]int) (Source, int) {
	if !filepath.IsAbs(src) {
		return Source{Err: "not an absolute path"}, -1
	}
	p := filepath.Clean(src)
	dirfd, name, parent := unix.AT_FDCWD, p, ""
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS}
	for q, fd := range below {
		if strings.HasPrefix(p, q+"/") && len(q) > len(parent) {
			dirfd, name, parent = fd, p[len(q)+1:], q
		}
	}
	if parent != "" {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH
	}
	var fd int
	var err error
	for range 3 { // openat2 asks to retry when a rename raced its lookup
		if fd, err = unix.Openat2(dirfd, name, &how); !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP) && parent != "":
		return Source{Err: "a symbolic link on the way from " + parent + ", a folder the container may write"}, -1
	case err != nil:
		return Source{Err: fmt.Sprintf("open: %v", err)}, -1
	}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	real, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err := errors.Join(unix.Fstat(fd, &st), unix.Fstatfs(fd, &sfs), lerr); err != nil || !filepath.IsAbs(real) || strings.HasSuffix(real, " (deleted)") {
		unix.Close(fd)
		return Source{Err: fmt.Sprintf("describe %s: %v %s", p, err, real)}, -1
	}
	s := Source{Path: real, Type: fileType(st.Mode), Perm: fs.FileMode(st.Mode & 0o7777), UID: st.Uid, FS: sfs.Type}
	var self, up unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &self) != nil ||
		unix.Statx(unix.AT_FDCWD, filepath.Dir(real), 0, unix.STATX_MNT_ID, &up) != nil {
		unix.Close(fd)
		return Source{Err: "read the mount of " + real}, -1
	}
	s.MountPoint = real == "/" || self.Mnt_id != up.Mnt_id
	if s.MountPoint {
		root, mounts, err := mountOf(self.Mnt_id, st.Dev)
		if err != nil {
			unix.Close(fd)
			return Source{Err: err.Error()}, -1
		}
		s.Bound = root != "/" || mounts > 1
	}
	if s.Type == 0 && etcFileName(real) {
		s.Etc = readEtc(fd, real)
	}
	return s, fd
}

// etcFileName: p is one of Docker's per-container /etc files,
// <dockerRoot>/containers/<id>/{hosts,resolv.conf,hostname}.
func etcFileName(p string) bool {
	return filepath.Dir(filepath.Dir(p)) == filepath.Join(dockerRoot, "containers") && engineFile(p)
}

// readEtc reads the file the descriptor fd (O_PATH) opened, through /proc/self/fd, so that it is
// the file the shim described and not whatever its name holds by now; beside resolv.conf it
// reads the engine's DNS settings for the container (hostconfig.json, in the same folder) and the
// host's resolv.conf, Docker's source for a container without a network.
func readEtc(fd int, name string) *EtcFile {
	e := &EtcFile{}
	content, err := readSmall("/proc/self/fd/"+strconv.Itoa(fd), name)
	if err != nil {
		return &EtcFile{Err: err.Error()}
	}
	e.Content = string(content)
	if filepath.Base(name) != "resolv.conf" {
		return e
	}
	cfg := filepath.Join(filepath.Dir(name), "hostconfig.json")
	data, err := readSmall(cfg, cfg)
	if err != nil {
		return &EtcFile{Err: err.Error()}
	}
	d, err := ParseEngineDNS(data)
	if err != nil {
		return &EtcFile{Err: err.Error()}
	}
	e.Engine = &d
	if host, err := readSmall("/etc/resolv.conf", "/etc/resolv.conf"); err == nil {
		e.Host = string(host)
	}
	return e
}

func readSmall(path, name string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	return readCapped(f, maxEtcFile, name)
}

// mountOf reads the host's mount table (/proc/self/mountinfo: the shim runs in the host's mount
// namespace) for the mount id: the folder of its filesystem it shows, and how many mounts show
// the filesystem of device dev. A tmpfs volume is one mount of a filesystem of its own; a bind of
// a host folder shows a folder below its filesystem's root, or a filesystem mounted elsewhere.
func mountOf(id, dev uint64) (root string, mounts int, err error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", 0, fmt.Errorf("read the mount table: %w", err)
	}
	device := fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev))
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[2] != device {
			continue
		}
		mounts++
		if f[0] == strconv.FormatUint(id, 10) {
			root, found = f[3], true
		}
	}
	if !found {
		return "", 0, fmt.Errorf("mount %d is not in the mount table", id)
	}
	return root, mounts, nil
}

func fileType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFREG:
		return 0
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	}
	return fs.ModeIrregular
}

// Engine reads the record under $SHARNESS_RUNTIME_DOCKER_ROOT (dockerd's --data-root) or Docker's
// default, /var/lib/docker.
func (osHost) Engine(id string) (EngineRecord, error) {
	return engineRecord(osHost{}, recordRoot(), id)
}

func (osHost) Record(id string) (EngineRecord, error) {
	r, _, err := readRecord(osHost{}, recordRoot(), id)
	return r, err
}

func recordRoot() string {
	if root := os.Getenv(EnvDockerRoot); root != "" {
		return root
	}
	return dockerRoot
}

func (osHost) Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

func (osHost) VolumeLabels(name string) (map[string]string, error) { return volumeLabels(name) }
