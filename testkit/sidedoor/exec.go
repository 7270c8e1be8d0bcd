package sidedoor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Exec returns a door's attempt that executes path with args and names the outcome: the Kind of
// the exec's error (EACCES when Landlock or a noexec mount refuses it), "exit N", or "executed".
func Exec(path string, args ...string) func(context.Context) (string, string) {
	return func(ctx context.Context) (string, string) {
		err := exec.CommandContext(ctx, path, args...).Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return fmt.Sprintf("exit %d", exit.ExitCode()), path
		case err != nil:
			return Kind(err), path
		}
		return "executed", path
	}
}

// CopyExec returns an attempt that copies the executable src into a new folder in dir, under its
// own name (a multi-call binary such as busybox keeps working), as a file the agent could have
// written, and executes it (see Exec); the copy is removed afterwards.
func CopyExec(src, dir string, args ...string) func(context.Context) (string, string) {
	return copied(src, dir, func(ctx context.Context, path string) (string, string) {
		return Exec(path, args...)(ctx)
	})
}

// LoaderExec is CopyExec with the copy run through the dynamic loader (loader path args...):
// the loader is an allowed binary that maps the copy itself, so a rule on execve(2) of the copy
// does not apply; only a noexec mount (mmap with PROT_EXEC refused) or seccomp stops it.
func LoaderExec(loader, src, dir string, args ...string) func(context.Context) (string, string) {
	return copied(src, dir, func(ctx context.Context, path string) (string, string) {
		got, _ := Exec(loader, append([]string{path}, args...)...)(ctx)
		return got, loader + " " + path
	})
}

// copied runs try on a copy of src made in a new folder in dir, then removes the copy.
func copied(src, dir string, try func(context.Context, string) (string, string)) func(context.Context) (string, string) {
	return func(ctx context.Context) (string, string) {
		in, err := os.Open(src)
		if err != nil {
			return "open " + Kind(err), src
		}
		defer in.Close()
		tmp, err := os.MkdirTemp(dir, ".sharness-probe-exec-")
		if err != nil {
			return "create " + Kind(err), dir
		}
		defer os.RemoveAll(tmp)
		out, err := os.OpenFile(filepath.Join(tmp, filepath.Base(src)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		if err != nil {
			return "create " + Kind(err), tmp
		}
		_, err = io.Copy(out, in)
		err = cmp.Or(err, out.Close())
		if err != nil {
			return "write " + Kind(err), out.Name()
		}
		return try(ctx, out.Name())
	}
}

// TempFile writes content to a new file in the temporary folder and returns its path.
func TempFile(pattern, content string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err == nil {
		_, err = f.WriteString(content)
		err = cmp.Or(err, f.Close())
	}
	if err != nil {
		return "", fmt.Errorf("write a temporary file: %w", err)
	}
	return f.Name(), nil
}

// OnlyEntry returns an attempt that lists dir: "<self> only" when nothing but self is in it
// (or it is empty), "others visible" otherwise, or the Kind of the error.
func OnlyEntry(dir, self string) func(context.Context) (string, string) {
	return func(context.Context) (string, string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return Kind(err), dir
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if slices.ContainsFunc(names, func(n string) bool { return n != self }) {
			return "others visible", strings.Join(names, ", ")
		}
		return self + " only", strings.Join(names, ", ")
	}
}
