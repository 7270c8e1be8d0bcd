package runc

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
		want Command
	}{
		{"version", []string{"--version"}, Command{}},
		{"no args", nil, Command{}},
		{"containerd create", append(append([]string{}, containerdGlobals...),
			"--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/p", "abc"),
			Command{Root: "/var/run/docker/runtime-runc/moby", Log: "/run/containerd/io.containerd.runtime.v2.task/moby/abc/log.json",
				LogFormat: "json", Name: "create", ID: "abc", flags: map[string][]string{"bundle": {"/b"}, "pid-file": {"/p"}}}},
		{"equals and single dash", []string{"-root=/r", "--log=/l", "-debug", "create", "-b=/b", "abc"},
			Command{Root: "/r", Log: "/l", Name: "create", ID: "abc", flags: map[string][]string{"bundle": {"/b"}}}},
		{"short bundle", []string{"run", "-b", "/b", "-d", "abc"},
			Command{Name: "run", ID: "abc", flags: map[string][]string{"bundle": {"/b"}, "detach": {"true"}}}},
		{"flags after the id are reordered", []string{"create", "abc", "--bundle", "/b", "--no-pivot=false"},
			Command{Name: "create", ID: "abc", flags: map[string][]string{"bundle": {"/b"}, "no-pivot": {"false"}}}},
		{"last bundle wins", []string{"create", "-b", "/one", "--bundle=/two", "abc"},
			Command{Name: "create", ID: "abc", flags: map[string][]string{"bundle": {"/one", "/two"}}}},
		{"no bundle", []string{"create", "abc"}, Command{Name: "create", ID: "abc", flags: map[string][]string{}}},
		{"exec process", []string{"exec", "--process", "/tmp/p.json", "--detach", "--pid-file", "/p", "abc"},
			Command{Name: "exec", ID: "abc", flags: map[string][]string{"process": {"/tmp/p.json"}, "detach": {"true"}, "pid-file": {"/p"}}}},
		{"exec stops at the id", []string{"exec", "-c", "CAP_SYS_ADMIN", "-u", "0:0", "abc", "sh", "--cap", "CAP_X"},
			Command{Name: "exec", ID: "abc", flags: map[string][]string{"cap": {"CAP_SYS_ADMIN"}, "user": {"0:0"}}}},
		{"update stdin", []string{"update", "--resources", "-", "abc"},
			Command{Name: "update", ID: "abc", flags: map[string][]string{"resources": {"-"}}}},
		{"update flags", []string{"update", "--pids-limit=10", "--memory", "1g", "abc"},
			Command{Name: "update", ID: "abc", flags: map[string][]string{"pids-limit": {"10"}, "memory": {"1g"}}}},
		{"other commands keep their arguments for runc", []string{"kill", "--all", "abc", "KILL"}, Command{Name: "kill"}},
		{"double dash before the command", []string{"--", "state", "abc"}, Command{Name: "state"}},
		// runc prints help or its version and runs no command: nothing to police (runc's help.bats).
		{"command help", []string{"--root", "/r", "create", "-h", "--bundle", "/missing", "abc"}, Command{Root: "/r"}},
		{"command help after the id", []string{"run", "abc", "--help"}, Command{}},
		{"exec help before the id", []string{"exec", "-h", "abc"}, Command{}},
		{"exec -h after the id is the process's", []string{"exec", "abc", "sh", "-h"}, Command{Name: "exec", ID: "abc"}},
		{"update help", []string{"update", "--help=true", "--memory", "1g", "abc"}, Command{}},
		{"command help turned off again", []string{"create", "-h", "-h=false", "abc"},
			Command{Name: "create", ID: "abc", flags: map[string][]string{"help": {"true", "false"}}}},
		{"global version", []string{"--log", "/l", "-v", "create", "--bundle", "/b", "abc"}, Command{Log: "/l"}},
		{"global help", []string{"--help", "update", "--pids-limit", "-1", "abc"}, Command{}},
		{"global help turned off", []string{"--help=false", "--version=0", "create", "abc"},
			Command{Name: "create", ID: "abc", flags: map[string][]string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.args)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.args, err)
			}
			if tt.want.flags == nil {
				tt.want.flags = map[string][]string{}
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(Command{})); d != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.args, d)
			}
		})
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
			_, err := Parse(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %v, want it to contain %q", tt.args, err, tt.want)
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
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		cmd, err := Parse(args)
		if err == nil {
			if fs, ok := commandFlags[cmd.Name]; ok {
				for name := range cmd.flags {
					if fs[name].name != name {
						t.Fatalf("Parse(%q) kept flag %q, not a canonical name", args, name)
					}
				}
			}
		}
	})
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{"abc": true, "a_b+c-d.e": true, "6f0e2b": true,
		"": false, ".": false, "..": false, "-x": false, "a/b": false, "a b": false, "é": false} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestFailureStatus(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"exec", "-p", "/p.json", "abc"}, 255},
		{[]string{"--root", "/r", "exec", "abc", "sh"}, 255},
		{[]string{"create", "-b", "/b", "abc"}, 1},
		{[]string{"exec", "--privileged", "abc"}, 255},
		{[]string{"--frobnicate", "exec", "abc"}, 1},
	} {
		if got := FailureStatus(tt.args); got != tt.want {
			t.Errorf("FailureStatus(%q) = %d, want %d", tt.args, got, tt.want)
		}
	}
}
