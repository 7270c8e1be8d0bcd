package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
)

var argsTests = []struct {
	name, raw string
	want      args
	wantErr   string // the whole error text; "" for success
}{
	{"command only", `{"command":"ls"}`, args{Command: "ls", Profile: sandbox.Analyse, Timeout: 60 * time.Second}, ""},
	{"everything", `{"command":"make","profile":"build","timeout":600,"cwd":"src/pkg"}`,
		args{Command: "make", Profile: sandbox.Build, Timeout: 600 * time.Second, Cwd: "src/pkg"}, ""},
	{"admin decodes", `{"command":"x","profile":"admin"}`, args{Command: "x", Profile: sandbox.Admin, Timeout: 60 * time.Second}, ""},
	{"empty cwd is the root", `{"command":"x","cwd":""}`, args{Command: "x", Profile: sandbox.Analyse, Timeout: 60 * time.Second}, ""},
	{"timeout 1", `{"command":"x","timeout":1}`, args{Command: "x", Profile: sandbox.Analyse, Timeout: time.Second}, ""},
	{"no arguments", ``, args{}, `invalid argument "command": required`},
	{"empty object", `{}`, args{}, `invalid argument "command": required`},
	{"empty command", `{"command":""}`, args{}, `invalid argument "command": must be a non-empty string of at most 65536 bytes without NUL`},
	{"NUL in command", `{"command":"a\u0000b"}`, args{}, `invalid argument "command": must be a non-empty string of at most 65536 bytes without NUL`},
	{"command not a string", `{"command":["ls"]}`, args{}, `invalid argument "command": must be a non-empty string of at most 65536 bytes without NUL`},
	{"command null", `{"command":null}`, args{}, `invalid argument "command": must be a non-empty string of at most 65536 bytes without NUL`},
	{"command too long", `{"command":"` + strings.Repeat("x", sandbox.MaxCommand+1) + `"}`, args{}, `invalid argument "command": must be a non-empty string of at most 65536 bytes without NUL`},
	{"profile root", `{"command":"x","profile":"root"}`, args{}, `invalid argument "profile": "root" is not one of analyse, build, admin`},
	{"profile case", `{"command":"x","profile":"Build"}`, args{}, `invalid argument "profile": "Build" is not one of analyse, build, admin`},
	{"profile number", `{"command":"x","profile":1}`, args{}, `invalid argument "profile": must be a string, one of analyse, build, admin`},
	{"timeout 0", `{"command":"x","timeout":0}`, args{}, `invalid argument "timeout": 0 must be a whole number of seconds from 1 to 600`},
	{"timeout 601", `{"command":"x","timeout":601}`, args{}, `invalid argument "timeout": 601 must be a whole number of seconds from 1 to 600`},
	{"timeout fraction", `{"command":"x","timeout":1.5}`, args{}, `invalid argument "timeout": 1.5 must be a whole number of seconds from 1 to 600`},
	{"timeout string", `{"command":"x","timeout":"60"}`, args{}, `invalid argument "timeout": "60" must be a whole number of seconds from 1 to 600`},
	{"timeout null", `{"command":"x","timeout":null}`, args{}, `invalid argument "timeout": null must be a whole number of seconds from 1 to 600`},
	{"timeout negative", `{"command":"x","timeout":-5}`, args{}, `invalid argument "timeout": -5 must be a whole number of seconds from 1 to 600`},
	{"cwd escapes", `{"command":"x","cwd":"../etc"}`, args{}, `invalid argument "cwd": "../etc" must be a clean relative path inside the workspace, without ".."`},
	{"cwd absolute", `{"command":"x","cwd":"/etc"}`, args{}, `invalid argument "cwd": "/etc" must be a clean relative path inside the workspace, without ".."`},
	{"cwd unclean", `{"command":"x","cwd":"a/./b"}`, args{}, `invalid argument "cwd": "a/./b" must be a clean relative path inside the workspace, without ".."`},
	{"unknown field", `{"command":"x","env":{}}`, args{}, `invalid argument "env": unknown field (the fields are command, profile, timeout, cwd)`},
	{"case-folded field", `{"Command":"x"}`, args{}, `invalid argument "Command": unknown field (the fields are command, profile, timeout, cwd)`},
	{"repeated field", `{"command":"x","command":"y"}`, args{}, `invalid arguments: json: duplicate key "command"`},
	{"not an object", `["ls"]`, args{}, `invalid arguments: not a JSON object`},
	{"null", `null`, args{}, `invalid arguments: not a JSON object`},
	{"trailing data", `{"command":"x"} {}`, args{}, `invalid arguments: json: data after the value at offset 16`},
	{"invalid UTF-8", "{\"command\":\"\xff\"}", args{}, `invalid arguments: json: invalid UTF-8`},
	{"deep", `{"command":"x","cwd":[[1]]}`, args{}, `invalid arguments: json: nested deeper than 2`},
}

func TestDecodeArgs(t *testing.T) {
	for _, tt := range argsTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeArgs([]byte(tt.raw))
			if tt.wantErr != "" {
				var ae *argError
				if err == nil || err.Error() != tt.wantErr || !errors.As(err, &ae) {
					t.Fatalf("decodeArgs error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeArgs: %v", err)
			}
			if got != tt.want {
				t.Errorf("decodeArgs = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzBashArgs: arguments come from the agent. Decoding never panics, and what it accepts is
// something the sandbox accepts too.
func FuzzBashArgs(f *testing.F) {
	for _, tt := range argsTests {
		f.Add([]byte(tt.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := decodeArgs(raw)
		if err != nil {
			var ae *argError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an argError", err)
			}
			return
		}
		if a.Command == "" || len(a.Command) > sandbox.MaxCommand || strings.IndexByte(a.Command, 0) >= 0 ||
			a.Timeout < time.Second || a.Timeout > maxTimeout*time.Second || !sandbox.CwdValid(a.Cwd) {
			t.Fatalf("decodeArgs(%q) accepted %+v", raw, a)
		}
		switch a.Profile {
		case sandbox.Analyse, sandbox.Build, sandbox.Admin:
		default:
			t.Fatalf("decodeArgs(%q) accepted profile %q", raw, a.Profile)
		}
	})
}

func TestCheckCwd(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"src/pkg", "other"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, "file"), nil, 0o644)
	os.Symlink("src", filepath.Join(ws, "inside"))
	os.Symlink("/etc", filepath.Join(ws, "outside"))
	os.Symlink("../../..", filepath.Join(ws, "src/up"))
	tests := []struct {
		cwd string
		ok  bool
	}{
		{"", true}, {"src", true}, {"src/pkg", true}, {"inside", true}, {"inside/pkg", true},
		{"missing", false}, {"file", false}, {"outside", false}, {"src/up", false}, {"src/up/etc", false},
	}
	for _, tt := range tests {
		err := checkCwd(ws, tt.cwd)
		if (err == nil) != tt.ok {
			t.Errorf("checkCwd(%q) = %v, want ok %v", tt.cwd, err, tt.ok)
		}
		var ae *argError
		if err != nil && (!errors.As(err, &ae) || ae.field != "cwd") {
			t.Errorf("checkCwd(%q) = %v: not an error naming cwd", tt.cwd, err)
		}
	}
	if err := checkCwd(filepath.Join(ws, "nope"), "src"); err == nil {
		t.Error("checkCwd in a missing workspace succeeded")
	}
}
