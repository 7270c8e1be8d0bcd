package sidedoor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
)

// Absent is a door that expects nothing at path, such as a Docker socket; if something is
// there it reports "present" and, for a socket, whether it accepts a connection.
func Absent(name, why, path string) Door {
	return Door{Name: name, Expected: "absent", Why: why, Try: func(ctx context.Context) (string, string) {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return "absent", ""
		}
		got, note := Dial(ctx, "unix", path)
		return "present, " + got, note
	}}
}

// Writable is a door that opens the first of paths that exists for writing, and never writes:
// a read-only mount answers EROFS, a file the process may not write EACCES.
func Writable(name, why string, paths ...string) Door {
	return Door{Name: name, Expected: "EROFS|EACCES", Why: why, Try: func(context.Context) (string, string) {
		for _, p := range paths {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				return Kind(err), p
			}
			f.Close()
			return "opened for writing", p
		}
		return "absent", strings.Join(paths, ", ")
	}}
}
