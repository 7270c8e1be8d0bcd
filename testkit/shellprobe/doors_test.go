package main

import (
	"regexp"
	"testing"

	"github.com/sharness-ai/sharness/internal/secretfilter"
)

func TestFailed(t *testing.T) {
	tests := []struct {
		name string
		o    output
		want string
	}{
		{"success", output{Stdout: "x\n"}, "succeeded"},
		{"read-only", output{ExitCode: 1, Stderr: "bash: line 1: f: Read-only file system\n"}, "EROFS"},
		{"landlock", output{ExitCode: 126, Stderr: "bash: line 1: ./x.sh: Permission denied\n"}, "EACCES"},
		{"mount as non-root", output{ExitCode: 32, Stderr: "mount: /tmp/m: must be superuser to use mount.\n"}, "EPERM"},
		{"strace", output{ExitCode: 1, Stderr: "strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted\n"}, "EPERM"},
		{"busy", output{ExitCode: 1, Stderr: "mv: cannot move '.git': Device or resource busy\n"}, "EBUSY"},
		{"no name", output{ExitCode: 1, Stderr: "bash: llm: Name or service not known\nbash: line 1: /dev/tcp/llm/8080: Invalid argument\n"}, "no-such-host"},
		{"missing program", output{ExitCode: 127, Stderr: "bash: line 1: strace: command not found\n"}, "ENOENT"},
		{"other", output{ExitCode: 2, Stderr: "something else\n"}, "unexplained failure"},
	}
	for _, tt := range tests {
		if got, _ := failed(tt.o); got != tt.want {
			t.Errorf("%s: failed = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHeader(t *testing.T) {
	head := "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nx-sharness-deny: host-not-allowed\r\n\r\n"
	if got := header(head, "X-Sharness-Deny"); got != "host-not-allowed" {
		t.Errorf("header = %q", got)
	}
	if got := header(head, "X-Missing"); got != "" {
		t.Errorf("header of a missing name = %q", got)
	}
}

// TestFakeKey: the planted key has the Anthropic shape, and the secret filter bash uses finds it.
func TestFakeKey(t *testing.T) {
	k := fakeKey()
	if !regexp.MustCompile(`^sk-ant-api03-[A-Za-z0-9_-]{93}AA$`).MatchString(k) || k == fakeKey() {
		t.Fatalf("fakeKey = %q: not a fresh key of the Anthropic shape", k)
	}
	f, err := secretfilter.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if hits := f.Scan([]byte("echo " + k + "\n")); len(hits) != 1 || hits[0].Rule != "anthropic-api-key" {
		t.Errorf("the secret filter finds %+v in the planted key", hits)
	}
}
