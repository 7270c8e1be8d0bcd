package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/internal/artefact"
)

const (
	envRunc      = "SHARNESS_RUNTIME_RUNC" // the runc binary; default: runc on PATH
	maxFile      = 8 << 20                 // config.json, process.json, resources
	maxStdin     = 1 << 20                 // the default pipe-max-size: what a pipe can hold
	stateTimeout = 10 * time.Second
)

// osHost is the machine as the decision sees it.
type osHost struct{ runc string }

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

func (osHost) LandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// maxCode caps the binary HashInRoot reads: Claude Code's is about 200 MiB.
const maxCode = 1 << 30

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

// Bundle asks runc itself (`runc state`, whose JSON carries "bundle") rather than reading
// runc's internal <root>/<id>/state.json, whose layout is not a public contract.
func (h osHost) Bundle(root, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	args := []string{"state", id}
	if root != "" {
		args = append([]string{"--root", root}, args...)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, h.runc, args...)
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

// findRunc returns the runc to hand over to: $SHARNESS_RUNTIME_RUNC, else runc on PATH. It must
// not be this binary: registered under the name runc, the shim would exec itself forever.
func findRunc(getenv func(string) string) (string, error) {
	path := getenv(envRunc)
	if path == "" {
		p, err := exec.LookPath("runc")
		if err != nil {
			return "", fmt.Errorf("find runc (set %s or put runc on PATH): %w", envRunc, err)
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

// handover replaces this process with runc, with the same argv but argv[0] (and an exec's
// --process, see processFD). Only on failure does it return.
func handover(runc string, args []string, act action) error {
	if act.rewrite != nil {
		if err := writeJSON(act.specPath, act.rewrite); err != nil {
			return err
		}
	}
	if act.process != nil {
		var err error
		if args, err = processFD(args, act.procPath, act.process); err != nil {
			return err
		}
	}
	if act.pipeStdin {
		if err := stdinFrom(act.stdin); err != nil {
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

// logLine is runc's log line (logrus's JSON) plus the refusal's parts as their own keys.
// containerd's runc shim reads the last "error" line of this file when runc fails and puts its
// msg in the error dockerd returns ("OCI runtime create failed: <msg>: unknown"); its decoder
// stops at the first line that is not JSON or whose time is not RFC 3339.
type logLine struct {
	Level     string `json:"level"`
	Msg       string `json:"msg"`
	Time      string `json:"time"`
	Container string `json:"container,omitempty"`
	Component string `json:"component,omitempty"`
	Policy    string `json:"policy,omitempty"`
	Field     string `json:"field"`
	Want      string `json:"want"`
	Got       string `json:"got"`
}

// report writes a refusal as one line to runc's --log file (in its --log-format) and as text to
// stderr. A log file that cannot be written is said on stderr; the refusal stands.
func report(r *refusal, logPath, format string, now time.Time, stderr io.Writer) {
	fmt.Fprintln(stderr, r.msg)
	if logPath == "" {
		return
	}
	ts := now.UTC().Format(time.RFC3339Nano)
	var line []byte
	if format == "json" {
		line, _ = json.Marshal(logLine{"error", r.msg, ts, r.container, r.component, r.policy, r.field, r.want, r.got})
	} else {
		line = fmt.Appendf(nil, "time=%q level=error msg=%s container=%s component=%s policy=%s field=%s want=%s got=%s",
			ts, strconv.Quote(r.msg), strconv.Quote(r.container), strconv.Quote(r.component),
			strconv.Quote(r.policy), strconv.Quote(r.field), strconv.Quote(r.want), strconv.Quote(r.got))
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sharness-runtime: write log %s: %v\n", logPath, err)
	}
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
