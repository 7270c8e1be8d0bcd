package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// containerd's go-runc writes argv in this shape (global flags first, then the command).
var containerdGlobals = []string{"--root", "/var/run/docker/runtime-runc/moby",
	"--log", "/run/containerd/io.containerd.runtime.v2.task/moby/abc/log.json", "--log-format", "json"}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want invocation
	}{
		{"version", []string{"--version"}, invocation{}},
		{"no args", nil, invocation{}},
		{"containerd create", append(append([]string{}, containerdGlobals...),
			"--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/p", "abc"),
			invocation{root: "/var/run/docker/runtime-runc/moby", log: "/run/containerd/io.containerd.runtime.v2.task/moby/abc/log.json",
				logFormat: "json", command: "create", id: "abc", flags: map[string][]string{"bundle": {"/b"}, "pid-file": {"/p"}}}},
		{"equals and single dash", []string{"-root=/r", "--log=/l", "-debug", "create", "-b=/b", "abc"},
			invocation{root: "/r", log: "/l", command: "create", id: "abc", flags: map[string][]string{"bundle": {"/b"}}}},
		{"short bundle", []string{"run", "-b", "/b", "-d", "abc"},
			invocation{command: "run", id: "abc", flags: map[string][]string{"bundle": {"/b"}, "detach": {"true"}}}},
		{"flags after the id are reordered", []string{"create", "abc", "--bundle", "/b", "--no-pivot=false"},
			invocation{command: "create", id: "abc", flags: map[string][]string{"bundle": {"/b"}, "no-pivot": {"false"}}}},
		{"last bundle wins", []string{"create", "-b", "/one", "--bundle=/two", "abc"},
			invocation{command: "create", id: "abc", flags: map[string][]string{"bundle": {"/one", "/two"}}}},
		{"no bundle", []string{"create", "abc"}, invocation{command: "create", id: "abc", flags: map[string][]string{}}},
		{"exec process", []string{"exec", "--process", "/tmp/p.json", "--detach", "--pid-file", "/p", "abc"},
			invocation{command: "exec", id: "abc", flags: map[string][]string{"process": {"/tmp/p.json"}, "detach": {"true"}, "pid-file": {"/p"}}}},
		{"exec stops at the id", []string{"exec", "-c", "CAP_SYS_ADMIN", "-u", "0:0", "abc", "sh", "--cap", "CAP_X"},
			invocation{command: "exec", id: "abc", flags: map[string][]string{"cap": {"CAP_SYS_ADMIN"}, "user": {"0:0"}}}},
		{"update stdin", []string{"update", "--resources", "-", "abc"},
			invocation{command: "update", id: "abc", flags: map[string][]string{"resources": {"-"}}}},
		{"update flags", []string{"update", "--pids-limit=10", "--memory", "1g", "abc"},
			invocation{command: "update", id: "abc", flags: map[string][]string{"pids-limit": {"10"}, "memory": {"1g"}}}},
		{"other commands keep their arguments for runc", []string{"kill", "--all", "abc", "KILL"}, invocation{command: "kill"}},
		{"double dash before the command", []string{"--", "state", "abc"}, invocation{command: "state"}},
		// runc prints help or its version and runs no command: nothing to police (runc's help.bats).
		{"command help", []string{"--root", "/r", "create", "-h", "--bundle", "/missing", "abc"}, invocation{root: "/r"}},
		{"command help after the id", []string{"run", "abc", "--help"}, invocation{}},
		{"exec help before the id", []string{"exec", "-h", "abc"}, invocation{}},
		{"exec -h after the id is the process's", []string{"exec", "abc", "sh", "-h"}, invocation{command: "exec", id: "abc"}},
		{"update help", []string{"update", "--help=true", "--memory", "1g", "abc"}, invocation{}},
		{"command help turned off again", []string{"create", "-h", "-h=false", "abc"},
			invocation{command: "create", id: "abc", flags: map[string][]string{"help": {"true", "false"}}}},
		{"global version", []string{"--log", "/l", "-v", "create", "--bundle", "/b", "abc"}, invocation{log: "/l"}},
		{"global help", []string{"--help", "update", "--pids-limit", "-1", "abc"}, invocation{}},
		{"global help turned off", []string{"--help=false", "--version=0", "create", "abc"},
			invocation{command: "create", id: "abc", flags: map[string][]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseArgs(tt.args)
			if err != nil {
				t.Fatalf("parseArgs(%q) error: %v", tt.args, err)
			}
			if tt.want.flags == nil {
				tt.want.flags = map[string][]string{}
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(invocation{})); d != "" {
				t.Errorf("parseArgs(%q) (-want +got):\n%s", tt.args, d)
			}
		})
	}
}

// TestHelpPassesThrough: with a help or version flag runc reads no bundle and starts nothing, so
// the shim hands over without reading one either (it used to refuse `runc create -h` for want of
// a config.json; found by runc's help.bats in hack/conformance.sh).
func TestHelpPassesThrough(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"create -h", []string{"create", "-h", "--bundle", "/missing", "abc"}},
		{"exec -h", []string{"exec", "-h", "missing"}},
		{"update --help", []string{"update", "--help", "-r", "-", "missing"}},
		{"global -v", []string{"-v", "run", "abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHost{} // no files, no containers, no stdin: any read would be a refusal
			if _, r := decide(tt.args, func(string) string { return "/policies" }, h); r != nil {
				t.Errorf("decide(%q) refused: %s", tt.args, r.msg)
			}
		})
	}
	// A help flag that does not end up true polices as before.
	if _, r := decide([]string{"create", "-h", "-h=false", "--bundle", "/missing", "abc"},
		func(string) string { return "/policies" }, &fakeHost{}); r == nil {
		t.Errorf("decide(create -h -h=false) with no bundle: allowed, want a refusal")
	}
}

func TestParseArgsRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown global flag", []string{"--frobnicate", "create", "abc"}, "not defined"},
		{"unknown create flag", []string{"create", "--privileged", "abc"}, "not defined"},
		{"triple dash", []string{"---root", "/r", "state"}, "not defined"},
		{"missing value", []string{"create", "abc", "--bundle"}, "needs an argument"},
		{"missing global value", []string{"--root"}, "needs an argument"},
		{"bad boolean", []string{"run", "--detach=maybe", "abc"}, "invalid boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseArgs(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseArgs(%q) error = %v, want it to contain %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestBytesOrInt(t *testing.T) {
	tests := []struct {
		name, flag, in string
		want           int64
		ok             bool
	}{
		{"plain", "memory", "1048576", 1 << 20, true},
		{"unit", "memory", "512m", 512 << 20, true},
		{"unit with b", "memory-swap", "1GiB", 1 << 30, true},
		{"fraction", "memory", "1.5k", 1536, true},
		{"unlimited", "memory-swap", "-1", -1, true},
		{"negative", "memory", "-5m", 0, false},
		{"exponent", "memory", "1e9", 0, false},
		{"garbage", "memory", "lots", 0, false},
		{"overflow", "memory", "99999999p", 0, false},
		{"integer flag", "cpu-quota", "-1", -1, true},
		{"integer flag refuses units", "cpu-quota", "1k", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bytesOrInt(tt.flag, tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("bytesOrInt(%q, %q) = %d, %v; want %d, ok=%v", tt.flag, tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseArgs(f *testing.F) {
	seeds := [][]string{
		append(append([]string{}, containerdGlobals...), "create", "--bundle", "/b", "abc"),
		{"exec", "-p", "/p.json", "abc"}, {"exec", "--cap=CAP_SYS_ADMIN", "-u", "0", "abc", "sh"},
		{"update", "-r", "-", "abc"}, {"update", "--memory", "1g", "abc"}, {"--version"}, {"kill", "abc"},
		{"run", "-b=", "--", "abc"}, {"-", "create"},
	}
	for _, s := range seeds {
		f.Add(strings.Join(s, "\x00"))
	}
	h := &fakeHost{files: fixtureFiles(f), bundles: map[string]string{"abc": "/bundle"}, stdin: "{}"}
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		inv, err := parseArgs(args)
		if err == nil {
			if fs, ok := commandFlags[inv.command]; ok {
				for name := range inv.flags {
					if fs[name].name != name {
						t.Fatalf("parseArgs(%q) kept flag %q, not a canonical name", args, name)
					}
				}
			}
		}
		act, r := decide(args, func(string) string { return "/policies" }, h)
		if r != nil && (act.pipeStdin || r.msg == "") {
			t.Fatalf("decide(%q) refused with action %+v and message %q", args, act, r.msg)
		}
		if r == nil && err != nil {
			t.Fatalf("decide(%q) allowed what parseArgs refused: %v", args, err)
		}
	})
}
