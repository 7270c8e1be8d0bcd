package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/internal/artefact"
)

const (
	// EnvRunc names the runc binary to hand over to; default: runc on PATH.
	EnvRunc      = "SHARNESS_RUNTIME_RUNC"
	stateTimeout = 10 * time.Second
)

// Bundle returns the bundle directory of a created container. It asks runc itself (`runc
// state`, whose JSON carries "bundle") rather than reading runc's internal <root>/<id>/state.json,
// whose layout is not a public contract. id must be ValidID.
func Bundle(ctx context.Context, runc, root, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	args := []string{"state", id}
	if root != "" {
		args = append([]string{"--root", root}, args...)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, runc, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("runc state %s: %w: %s", id, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var st struct {
		Bundle string `json:"bundle"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		return "", fmt.Errorf("parse runc state %s: %w", id, err)
	}
	if !filepath.IsAbs(st.Bundle) {
		return "", fmt.Errorf("runc state %s: bundle %q is not an absolute path", id, st.Bundle)
	}
	return st.Bundle, nil
}

// Handover is what the shim changes before runc runs a command it allowed; its zero value changes
// nothing, and runc gets the same argv and stdin.
type Handover struct {
	// PipeStdin: runc's stdin was consumed by the check, so runc gets Stdin instead.
	PipeStdin bool
	Stdin     []byte
	// Spec is the bundle's spec after the shim narrowed or confined it, to be written to
	// SpecPath before runc reads it; nil when nothing changed.
	Spec     *specs.Spec
	SpecPath string
	// Process is what runc reads for an exec's --process ProcessPath: the bytes the shim read (a
	// pipe such as /dev/fd/N cannot be read twice), or the process after the shim confined it.
	// Exec gives them to runc in a memfd; nil when the exec has no --process.
	Process     []byte
	ProcessPath string
}

// Find returns the runc to hand over to: $SHARNESS_RUNTIME_RUNC, else runc on PATH. It must not
// be this binary: registered under the name runc, the shim would exec itself forever.
func Find(getenv func(string) string) (string, error) {
	path := getenv(EnvRunc)
	if path == "" {
		p, err := exec.LookPath("runc")
		if err != nil {
			return "", fmt.Errorf("find runc (set %s or put runc on PATH): %w", EnvRunc, err)
		}
		path = p
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("runc %q: not an absolute path", path)
	}
	runc, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("find runc: %w", err)
	}
	if self, err := os.Executable(); err == nil {
		if me, err := os.Stat(self); err == nil && os.SameFile(me, runc) {
			return "", fmt.Errorf("runc %q is sharness-runtime itself", path)
		}
	}
	return path, nil
}

// Exec replaces this process with runc, with the same argv but argv[0] (and an exec's --process,
// see processFD), after making the changes h names. Only on failure does it return.
func Exec(runc string, args []string, h Handover) error {
	if h.Spec != nil {
		if err := writeJSON(h.SpecPath, h.Spec); err != nil {
			return err
		}
	}
	if h.Process != nil {
		var err error
		if args, err = processFD(args, h.ProcessPath, h.Process); err != nil {
			return err
		}
	}
	if h.PipeStdin {
		if err := stdinFrom(h.Stdin); err != nil {
			return err
		}
	}
	argv := append([]string{runc}, args...)
	if err := syscall.Exec(runc, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", runc, err)
	}
	return nil
}

// processFD hands runc the process the shim checked in a memfd it inherits, and points --process
// at it (/proc/self/fd/N): the file the engine named may be a pipe, which the shim's read emptied,
// and it is never rewritten in place. args must name path as --process's value exactly once.
func processFD(args []string, path string, data []byte) ([]string, error) {
	at, prefix := -1, "" // the argument to replace, and what comes before the value in it
	n := 0
	for i, a := range args {
		switch {
		case (a == "-p" || a == "--process") && i+1 < len(args) && args[i+1] == path:
			at, prefix, n = i+1, "", n+1
		case a == "-p="+path || a == "--process="+path:
			at, prefix, n = i, a[:len(a)-len(path)], n+1
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("hand the checked process to runc: --process %s appears %d times", path, n)
	}
	fd, err := unix.MemfdCreate("sharness-process.json", 0) // no CLOEXEC: runc inherits it
	if err == nil {
		_, err = unix.Write(fd, data)
	}
	if err == nil {
		_, err = unix.Seek(fd, 0, io.SeekStart)
	}
	if err != nil {
		return nil, fmt.Errorf("hand the checked process to runc: %w", err)
	}
	out := slices.Clone(args)
	out[at] = prefix + "/proc/self/fd/" + strconv.Itoa(fd)
	return out, nil
}

// stdinFrom makes fd 0 a pipe that holds data and then EOF: the shim read runc's stdin to check
// it, so runc reads the checked bytes instead. The write end is non-blocking and closed before
// exec, so data that does not fit fails here rather than hanging.
func stdinFrom(data []byte) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("stdin pipe: %w", err)
	}
	defer unix.Close(p[0])
	if len(data) > 4096 {
		_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, len(data))
	}
	err := unix.SetNonblock(p[1], true)
	for rest := data; err == nil && len(rest) > 0; {
		var n int
		n, err = unix.Write(p[1], rest)
		rest = rest[max(n, 0):]
	}
	unix.Close(p[1])
	if err != nil {
		return fmt.Errorf("stdin pipe: write %d bytes: %w", len(data), err)
	}
	if err := unix.Dup3(p[0], 0, 0); err != nil {
		return fmt.Errorf("stdin pipe: dup: %w", err)
	}
	return nil
}

// writeJSON replaces the bundle's config.json (or an exec's process.json) with v, atomically
// (internal/artefact: a temporary file beside it, synced, then renamed), so that runc never reads
// half of it.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := artefact.Write(filepath.Dir(path), map[string][]byte{filepath.Base(path): data}); err != nil {
		return fmt.Errorf("rewrite %s: %w", path, err)
	}
	return nil
}

// Kill sends SIGKILL to container id's processes (`runc kill --all <id> KILL`): the shim's cut of
// a container whose attachments changed after it started.
func Kill(ctx context.Context, runc, root, id string) error {
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	args := []string{"kill", "--all", id, "KILL"}
	if root != "" {
		args = append([]string{"--root", root}, args...)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, runc, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("runc kill %s: %w: %s", id, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
