package guard

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Prepare makes every protected path missing from workspace, on the host before the stack starts:
// the agent's read-only binds need something to bind. An entry ending in "/" becomes a folder
// (0755), any other an empty file (0644); missing folders above either are made too (0755). It
// never follows a symlink and refuses, naming the path, a protected path (or a folder above one)
// that is a symlink or of the wrong type. It returns what it made, in order, folders with a
// trailing "/"; run again, it makes nothing.
func Prepare(workspace string, protected []string) (created []string, err error) {
	root, err := unix.Open(workspace, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", workspace, err)
	}
	defer unix.Close(root)
	for _, e := range protected {
		made, err := ensure(root, e, true)
		created = append(created, made...)
		if err != nil {
			return created, err
		}
	}
	return created, nil
}

// ensure checks that the protected path e exists under root with its type, making it and the
// folders above it when create is set.
func ensure(root int, e string, create bool) (made []string, err error) {
	rel, dir, ref := Clean(e)
	if ref != nil {
		return nil, fmt.Errorf("protected path %q: %s", e, ref.Message)
	}
	mkFrom := MaxDepth + 1
	if create {
		mkFrom = 0
	}
	if dir {
		fd, err := walk(root, rel, mkFrom, &made)
		if err != nil {
			return made, fmt.Errorf("protected folder %q: %w", e, explain(err))
		}
		return made, unix.Close(fd)
	}
	parent, name := split(rel)
	fd, err := walk(root, parent, mkFrom, &made)
	if err != nil {
		return made, fmt.Errorf("protected file %q: %w", e, explain(err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		if ref := notRegular(rel, st.Mode, false); ref != nil {
			return made, fmt.Errorf("protected file %q: %s", e, ref.Message)
		}
		return made, nil
	case !create || !errors.Is(err, unix.ENOENT):
		return made, fmt.Errorf("protected file %q: %w", e, err)
	}
	f, err := openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err == nil {
		made = append(made, rel)
		err = errors.Join(unix.Fchmod(f, 0o644), unix.Close(f))
	}
	if err != nil {
		return made, fmt.Errorf("make protected file %q: %w", e, explain(err))
	}
	return made, nil
}

// explain says what ELOOP and ENOTDIR mean here, keeping the errno for errors.Is.
func explain(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("a symbolic link is in the way (never followed): %w", err)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("something other than a folder is in the way: %w", err)
	}
	return err
}
