package guard

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// resolve is how every component is opened: beneath the folder it is opened from, through no
// symlink (magic or not), and without crossing into another mount (fs's container has the
// workspace as one bind mount; a mount inside it is no protected path's).
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// ErrMissing is Open's error when protected paths are not in the workspace.
var ErrMissing = errors.New("protected paths missing from the workspace")

// Guard carries out changes to the protected paths of one workspace.
type Guard struct {
	mu    sync.Mutex // one change at a time: rollbacks and the entry count assume no other
	root  int        // the workspace, O_DIRECTORY
	rules *Rules
	scan  Scanner
}

// Result is what a change did.
type Result struct {
	Path             string
	Bytes            int64
	ExecBitsStripped bool
	Created          bool
	Approval         Reason // Apply: how a change to an ask path was decided ("approved", "approval_denied", ...); "" if none was asked for
	Digest           string // Apply: sha256:<hex> of the canonical bytes put to the gate, as its request names them
}

// Open opens workspace and checks that every protected path exists with its type, and is no
// symlink; it never creates one (Prepare does, on the host). The error wraps ErrMissing when some
// are missing, and names them.
func Open(workspace string, r *Rules, s Scanner) (*Guard, error) {
	fd, err := unix.Open(workspace, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", workspace, err)
	}
	var missing []string
	for _, e := range r.entries() {
		if _, err := ensure(fd, e, false); errors.Is(err, unix.ENOENT) {
			missing = append(missing, e)
		} else if err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if len(missing) > 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s", ErrMissing, strings.Join(missing, ", "))
	}
	return &Guard{root: fd, rules: r, scan: s}, nil
}

// Close releases the workspace.
func (g *Guard) Close() error { return unix.Close(g.root) }

func (r *Rules) entries() []string {
	out := slices.Clone(r.files)
	for _, d := range r.dirs {
		out = append(out, d+"/")
	}
	slices.Sort(out)
	return out
}

// write makes c.Path hold c.Content (checkWrite decides), on an ask path only with approved, the
// canonical bytes of c. Missing folders inside a protected folder are made; a protected root file
// is rewritten in place, any other file replaced atomically.
func (g *Guard) write(c Change, approved []byte) (Result, error) {
	p, content := c.Path, c.Content
	t, asked, ref := g.rules.checkWrite(p, content, c.Mode, g.scan)
	if ref == nil && t.ask {
		ref = granted(t.Path, approved, c.canonical(fileOf(content, c.Mode)))
	}
	if ref != nil {
		return Result{}, ref
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	res := Result{Path: t.Path, Bytes: int64(len(content))}
	parent, name := split(t.Path)
	var made []string
	dir, err := walk(g.root, parent, depth(t.root), &made)
	if err != nil {
		return res, g.undo(made, fail(t.Path, err))
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	exists := err == nil
	switch {
	case err != nil && !errors.Is(err, unix.ENOENT):
		return res, g.undo(made, fail(t.Path, err))
	case !exists && t.isRoot:
		return res, refuse(ReasonNotFound, "the protected file %q is missing; the person must run `sharness-ai workspace init`", t.Path)
	case exists:
		if ref := notRegular(t.Path, st.Mode, false); ref != nil {
			return res, g.undo(made, ref)
		}
	}
	var m uint32
	m, res.ExecBitsStripped = g.rules.Mode(asked, st.Mode, exists)
	res.Created = !exists
	if len(made) > 0 || !exists {
		if ref := g.room(!exists); ref != nil {
			return res, g.undo(made, ref)
		}
	}
	if t.isRoot {
		err = rewrite(dir, name, t.Path, content, m, g.rules.maxSize)
	} else {
		err = replace(dir, name, content, m)
	}
	if err != nil {
		return res, g.undo(made, fail(t.Path, err))
	}
	return res, nil
}

// remove deletes a file or an empty folder inside a protected folder (checkDelete decides), on an
// ask path only with approved, the canonical bytes of c.
func (g *Guard) remove(c Change, approved []byte) (Result, error) {
	p := c.Path
	t, ref := g.rules.checkDelete(p)
	if ref == nil && t.ask {
		ref = granted(t.Path, approved, c.canonical(file{}))
	}
	if ref != nil {
		return Result{}, ref
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	res := Result{Path: t.Path}
	dir, name, st, err := g.entry(t.Path)
	if err != nil {
		return res, err
	}
	defer unix.Close(dir)
	if strings.HasSuffix(p, "/") && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return res, refuse(ReasonWrongType, "%q ends in \"/\" but is not a folder", p)
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	} else {
		res.Bytes = st.Size
	}
	switch err := unix.Unlinkat(dir, name, flags); {
	case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST):
		return res, refuse(ReasonNotEmpty, "the folder %q is not empty; delete its entries first", t.Path)
	case err != nil:
		return res, fail(t.Path, err)
	}
	return res, fail(t.Path, unix.Fsync(dir))
}

// rename moves an entry inside a protected folder to a new name inside one, never replacing
// what is there (checkRename decides). A file moved must also pass the content rules at its
// destination (size, secrets), and loses its x bits unless they are allowed. A rename into, out
// of or inside an ask path moves only a file, and only with approved, the canonical bytes of c
// and of the file as it is when it moves.
func (g *Guard) rename(c Change, approved []byte) (Result, error) {
	f, t, ref := g.rules.checkRename(c.Path, c.To)
	ask := askPath(f, t)
	if ref == nil && ask != "" && approved == nil {
		ref = approval(ask)
	}
	if ref != nil {
		return Result{}, ref
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	res := Result{Path: t.Path}
	fdir, fname, st, err := g.entry(f.Path)
	if err != nil {
		return res, err
	}
	defer unix.Close(fdir)
	restore := func() {}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		fd, content, err := g.source(fdir, fname, f.Path)
		if err != nil {
			return res, err
		}
		defer unix.Close(fd)
		if ask != "" {
			if ref := granted(ask, approved, c.canonical(sourceFile(content, st.Mode))); ref != nil {
				return res, ref
			}
		}
		if ref := g.rules.CheckContent(t.Path, content, g.scan); ref != nil {
			return res, ref
		}
		var m uint32
		m, res.ExecBitsStripped = g.rules.Mode(0, st.Mode, true)
		res.Bytes = int64(len(content))
		if res.ExecBitsStripped {
			if err := unix.Fchmod(fd, m); err != nil {
				return res, fail(f.Path, err)
			}
			restore = func() { _ = unix.Fchmod(fd, st.Mode&0o7777) }
		}
	} else if ask != "" {
		return res, movesFolder(f.Path)
	}
	tparent, tname := split(t.Path)
	var made []string
	tdir, err := walk(g.root, tparent, depth(t.root), &made)
	if err != nil {
		restore()
		return res, g.undo(made, fail(t.Path, err))
	}
	defer unix.Close(tdir)
	if len(made) > 0 {
		if ref := g.room(false); ref != nil {
			restore()
			return res, g.undo(made, ref)
		}
	}
	if err := unix.Renameat2(fdir, fname, tdir, tname, unix.RENAME_NOREPLACE); err != nil {
		restore()
		if errors.Is(err, unix.EEXIST) {
			return res, g.undo(made, refuse(ReasonExists, "%q exists; rename never replaces (delete it first)", t.Path))
		}
		return res, g.undo(made, fail(t.Path, err))
	}
	return res, fail(t.Path, errors.Join(unix.Fsync(tdir), unix.Fsync(fdir)))
}

// source opens and reads the regular file name in dir, the source p of a rename; the caller
// closes fd.
func (g *Guard) source(dir int, name, p string) (fd int, content []byte, err error) {
	fd, err = openat(dir, name, unix.O_RDONLY|unix.O_NONBLOCK, 0) // a FIFO swapped in must not block
	if err != nil {
		return -1, nil, fail(p, err)
	}
	if content, err = readAll(fd, g.rules.maxSize); err != nil {
		unix.Close(fd)
		return -1, nil, fail(p, err)
	}
	return fd, content, nil
}

// entry finds the existing entry p for a delete or a rename: its folder (the caller closes it),
// its name and what it is. A symlink, or anything but a file or a folder, is refused.
func (g *Guard) entry(p string) (dir int, name string, st unix.Stat_t, err error) {
	parent, name := split(p)
	if dir, err = walk(g.root, parent, MaxDepth+1, nil); err != nil {
		return -1, "", st, fail(p, err)
	}
	if err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		err = fail(p, err)
	} else if ref := notRegular(p, st.Mode, true); ref != nil {
		err = ref
	}
	if err != nil {
		unix.Close(dir)
		return -1, "", st, err
	}
	return dir, name, st, nil
}

// rewrite writes content over the protected root file name in dir in place. A protected root
// file is a single-file bind mount in the agent's container, and a bind holds the inode: if fs
// replaced the file by rename, the agent's read-only mount would stay on the old, unlinked inode
// while the new file showed through the agent's read-write workspace, writable (measured). So the
// same inode is opened (through no symlink) and overwritten from offset 0, truncated and synced.
// Without a rename there is no atomic switch; so that nothing is lost or left half-written when
// a write fails midway, the old content (at most max bytes: a larger file is refused before
// anything changes) and mode are kept and written back.
func rewrite(dir int, name, p string, content []byte, mode uint32, max int64) error {
	fd, err := openat(dir, name, unix.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return notRegular(p, st.Mode, false)
	case st.Nlink != 1:
		return refuse(ReasonWrongType, "%q has other hard links, which a rewrite in place would change too", p)
	}
	old, err := readAll(fd, max)
	var ref *Refusal
	if errors.As(err, &ref) {
		return refuse(ReasonTooLarge, "the existing %q is larger than business.fs.max_file_size, so fs could not restore it if the write failed", p)
	} else if err != nil {
		return err
	}
	oldMode := st.Mode & 0o7777
	if mode != oldMode {
		if err := unix.Fchmod(fd, mode); err != nil {
			return err
		}
	}
	if err := put(fd, content); err != nil {
		undo := put(fd, old)
		if mode != oldMode {
			undo = errors.Join(undo, unix.Fchmod(fd, oldMode))
		}
		return errors.Join(err, undo)
	}
	return nil
}

// replace writes content to name in dir atomically: a new file made exclusively (0600 while it is
// written), given its mode, synced, renamed over name, then the folder synced. A reader sees the
// old file or the new one; on failure the new file is removed and name is as it was.
func replace(dir int, name string, content []byte, mode uint32) error {
	var tmp string
	fd, err := -1, error(unix.EEXIST)
	for i := 0; i < 4 && errors.Is(err, unix.EEXIST); i++ {
		tmp = fmt.Sprintf(".sharness-fs-%016x.tmp", rand.Uint64())
		fd, err = openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	}
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		unix.Close(fd)
		if !renamed {
			_ = unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if err := errors.Join(put(fd, content), unix.Fchmod(fd, mode), unix.Fsync(fd)); err != nil {
		return err
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		return err
	}
	renamed = true
	return unix.Fsync(dir)
}

// put writes b over fd from offset 0, truncates it to len(b) and syncs it.
func put(fd int, b []byte) error {
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.ErrShortWrite
		}
		off += n
	}
	return errors.Join(unix.Ftruncate(fd, int64(len(b))), unix.Fsync(fd))
}

// readAll reads fd from offset 0, refusing (ReasonTooLarge) more than max bytes.
func readAll(fd int, max int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size > max {
		return nil, refuse(ReasonTooLarge, "the file is %d bytes; business.fs.max_file_size is %d", st.Size, max)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err == unix.EINTR {
			continue
		} else if err != nil {
			return nil, err
		} else if n == 0 {
			return b[:off], nil
		}
		off += n
	}
	return b, nil
}

// room refuses a change that would add entries (made folders, and a new file) beyond the limit
// on entries under the protected folders. The count includes folders already made.
func (g *Guard) room(file bool) *Refusal {
	n, limit := 0, g.rules.maxEntries
	for _, d := range g.rules.dirs {
		if slices.ContainsFunc(g.rules.dirs, func(o string) bool { return strings.HasPrefix(d, o+"/") }) {
			continue // counted with the folder holding it
		}
		fd, err := walk(g.root, d, MaxDepth+1, nil)
		if err == nil {
			err = count(fd, &n, limit+1, MaxDepth)
		}
		if err != nil {
			return refusal(d, err)
		}
	}
	if file {
		n++
	}
	if n > limit {
		return refuse(ReasonTooMany, "the protected folders would hold more than %d entries", limit)
	}
	return nil
}

// count adds the entries under the folder fd (which it closes) to n, down to depth levels,
// stopping once n reaches limit.
func count(fd int, n *int, limit, depth int) error {
	f := os.NewFile(uintptr(fd), "protected folder")
	defer f.Close()
	for *n < limit {
		names, err := f.Readdirnames(128)
		if err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		for _, name := range names {
			*n++
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || depth == 0 || *n >= limit {
				continue
			}
			child, err := openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err == nil {
				err = count(child, n, limit, depth-1)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// undo removes the folders a failed change made, deepest first, and returns err.
func (g *Guard) undo(made []string, err error) error {
	for _, m := range slices.Backward(made) {
		parent, name := split(strings.TrimSuffix(m, "/"))
		if fd, err := walk(g.root, parent, MaxDepth+1, nil); err == nil {
			_ = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
			unix.Close(fd)
		}
	}
	return err
}

// openat opens name, one component, in dir under resolve and O_NOFOLLOW; a symlink is ELOOP.
func openat(dir int, name string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Mode: uint64(mode), Resolve: resolve}
	for range 16 { // EAGAIN: a concurrent rename elsewhere in the file system; try again
		fd, err := unix.Openat2(dir, name, &how)
		if err != unix.EAGAIN && err != unix.EINTR {
			if err != nil {
				return -1, err
			}
			return fd, nil
		}
	}
	return -1, unix.EAGAIN
}

// walk opens the folder rel ("" for root) under root one component at a time. A missing
// component at index mkFrom or deeper is made (mode 0755) and appended to made with a "/".
func walk(root int, rel string, mkFrom int, made *[]string) (int, error) {
	fd, err := unix.FcntlInt(uintptr(root), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil || rel == "" {
		return fd, err
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		next, err := openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		var st unix.Stat_t
		if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP // O_DIRECTORY is checked before O_NOFOLLOW
		}
		if errors.Is(err, unix.ENOENT) && i >= mkFrom {
			if err = unix.Mkdirat(fd, c, 0o700); err == nil {
				*made = append(*made, strings.Join(parts[:i+1], "/")+"/")
				if next, err = openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
					if err = unix.Fchmod(next, 0o755); err != nil {
						unix.Close(next)
					}
				}
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s: %w", strings.Join(parts[:i+1], "/"), err)
		}
		fd = next
	}
	return fd, nil
}

// notRegular refuses a symlink, and anything but a regular file (or a folder, if dirOK).
func notRegular(p string, mode uint32, dirOK bool) *Refusal {
	switch t := mode & unix.S_IFMT; {
	case t == unix.S_IFLNK:
		return refuse(ReasonSymlink, "%q is a symbolic link; fs never follows or changes one", p)
	case t == unix.S_IFREG, t == unix.S_IFDIR && dirOK:
		return nil
	case t == unix.S_IFDIR:
		return refuse(ReasonWrongType, "%q is a folder, not a file", p)
	}
	return refuse(ReasonWrongType, "%q is neither a regular file nor a folder", p)
}

// fail turns an error from a change of p into a Refusal (see refusal); nil stays nil.
func fail(p string, err error) error {
	if err == nil {
		return nil
	}
	return refusal(p, err)
}

// refusal turns an error from a change of p into a Refusal, keeping it as the cause.
func refusal(p string, err error) *Refusal {
	var ref *Refusal
	switch {
	case errors.As(err, &ref):
		return ref
	case errors.Is(err, unix.ELOOP):
		ref = refuse(ReasonSymlink, "%q goes through a symbolic link; fs never follows one", p)
	case errors.Is(err, unix.EXDEV):
		ref = refuse(ReasonMount, "%q crosses into another mount", p)
	case errors.Is(err, unix.ENOTDIR):
		ref = refuse(ReasonWrongType, "a component of %q is not a folder", p)
	case errors.Is(err, unix.ENOENT):
		ref = refuse(ReasonNotFound, "%q does not exist", p)
	default:
		ref = refuse(ReasonIO, "fs could not change %q (the cause is in fs's log)", p)
	}
	ref.cause = err
	return ref
}
