package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
	"github.com/sharness-ai/sharness/internal/strictjson"
)

// args are a bash tool call's arguments, decoded and checked.
type args struct {
	Command string
	Profile sandbox.Profile
	Timeout time.Duration
	Cwd     string
}

// Bounds of the arguments.
const (
	defaultTimeout = 60 // seconds
	maxTimeout     = 600
)

var fields = []string{"command", "profile", "timeout", "cwd"}

// argError names the argument at fault: the text the agent reads.
type argError struct{ field, msg string }

func (e *argError) Error() string {
	if e.field == "" {
		return "invalid arguments: " + e.msg
	}
	return fmt.Sprintf("invalid argument %q: %s", e.field, e.msg)
}

func bad(field, format string, a ...any) error {
	return &argError{field: field, msg: fmt.Sprintf(format, a...)}
}

// decodeArgs reads a tool call's arguments, strictly: one JSON object in valid UTF-8, no
// repeated or case-folded key, no field but command (required, non-empty, at most
// sandbox.MaxCommand bytes, no NUL), profile (analyse, build or admin; analyse when absent),
// timeout (whole seconds, 1 to 600; 60 when absent) and cwd (a clean relative path without
// ".."; the workspace's root when absent). The error names the argument at fault.
func decodeArgs(raw []byte) (args, error) {
	a := args{Profile: sandbox.Analyse, Timeout: defaultTimeout * time.Second}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	if err := strictjson.Check(raw, 2); err != nil {
		return a, bad("", "%v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return a, bad("", "not a JSON object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(fields, k) {
			return a, bad(k, "unknown field (the fields are %s)", strings.Join(fields, ", "))
		}
	}
	v, ok := m["command"]
	if !ok {
		return a, bad("command", "required")
	}
	if err := str(v, &a.Command); err != nil || a.Command == "" || len(a.Command) > sandbox.MaxCommand || strings.IndexByte(a.Command, 0) >= 0 {
		return a, bad("command", "must be a non-empty string of at most %d bytes without NUL", sandbox.MaxCommand)
	}
	if v, ok := m["profile"]; ok {
		var p string
		if err := str(v, &p); err != nil {
			return a, bad("profile", "must be a string, one of %s", profileNames())
		}
		if !slices.Contains(sandbox.Profiles, sandbox.Profile(p)) {
			return a, bad("profile", "%q is not one of %s", p, profileNames())
		}
		a.Profile = sandbox.Profile(p)
	}
	if v, ok := m["timeout"]; ok {
		var n int
		if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > maxTimeout {
			return a, bad("timeout", "%s must be a whole number of seconds from 1 to %d", v, maxTimeout)
		}
		a.Timeout = time.Duration(n) * time.Second
	}
	if v, ok := m["cwd"]; ok {
		if err := str(v, &a.Cwd); err != nil || !sandbox.CwdValid(a.Cwd) {
			return a, bad("cwd", "%s must be a clean relative path inside the workspace, without \"..\"", v)
		}
	}
	return a, nil
}

// str decodes a JSON string, and nothing else (not null).
func str(v json.RawMessage, s *string) error {
	if len(v) == 0 || v[0] != '"' {
		return errors.New("not a string")
	}
	return json.Unmarshal(v, s)
}

func profileNames() string {
	names := make([]string, len(sandbox.Profiles))
	for i, p := range sandbox.Profiles {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// checkCwd makes sure cwd is a folder inside the workspace, resolved beneath it: a symbolic
// link may point elsewhere inside, never out. The sandbox's init opens it the same way again.
func checkCwd(workspace, cwd string) error {
	if cwd == "" {
		return nil
	}
	ws, err := unix.Open(workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the workspace: %w", err)
	}
	defer unix.Close(ws)
	fd, err := unix.Openat2(ws, cwd, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return bad("cwd", "%q is not a folder inside the workspace (%v)", cwd, err)
	}
	unix.Close(fd)
	return nil
}
