package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// output is the bash tool's structured result (images/bash).
type output struct {
	ExitCode        int      `json:"exit_code"`
	Signal          string   `json:"signal"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	StdoutBytes     int64    `json:"stdout_bytes"`
	StderrBytes     int64    `json:"stderr_bytes"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
	TimedOut        bool     `json:"timed_out"`
	Redacted        []string `json:"redacted"`
	Text            string   `json:"-"` // the result's text, what the model reads
}

type shell struct{ cs *mcp.ClientSession }

// call makes one tool call and returns its structured output, or the text of a tool error
// (refusal), or a protocol error.
func (s shell) call(ctx context.Context, args map[string]any) (o output, refusal string, err error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil {
		return o, "", err
	}
	if res.IsError {
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				refusal += t.Text
			}
		}
		return o, cmp.Or(refusal, "(a tool error without text)"), nil
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &o); err != nil {
		return o, "", fmt.Errorf("structured content: %w", err)
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			o.Text += t.Text
		}
	}
	return o, "", nil
}

// try is a door's attempt: run command under profile and let judge name the outcome.
func (s shell) try(profile, command string, timeout int, judge func(output) (string, string)) func(context.Context) (string, string) {
	return func(ctx context.Context) (string, string) {
		o, refusal, err := s.call(ctx, map[string]any{"command": command, "profile": profile, "timeout": timeout})
		switch {
		case err != nil:
			return "call failed", err.Error()
		case refusal != "":
			return "tool error", refusal
		}
		return judge(o)
	}
}

// failed judges a command that must fail: "succeeded", or the errno its stderr names.
func failed(o output) (string, string) {
	switch {
	case o.ExitCode == 0:
		return "succeeded", lastLine(o.Stdout)
	case o.ExitCode == 124 && strings.TrimSpace(o.Stderr) == "":
		// timeout(1) ended an attempt that nothing answered: with no resolver to ask, a
		// name outside the container's networks is looked up until the timeout.
		return "no-answer", "timeout(1) ended it after 4 s"
	}
	return errnoOf(o.Stderr), lastLine(o.Stderr)
}

// stdout judges a command by what it printed.
func stdout(o output) (string, string) {
	return strings.TrimSpace(o.Stdout), fmt.Sprintf("exit %d, %s", o.ExitCode, lastLine(o.Stderr))
}

// messages maps what the userland prints to the errno behind it, first match wins.
var messages = []struct{ text, name string }{
	{"Read-only file system", "EROFS"}, {"Permission denied", "EACCES"}, {"Operation not permitted", "EPERM"},
	{"must be superuser", "EPERM"}, {"Device or resource busy", "EBUSY"}, {"Resource temporarily unavailable", "EAGAIN"},
	{"Network is unreachable", "ENETUNREACH"}, {"No route to host", "EHOSTUNREACH"}, {"Connection refused", "ECONNREFUSED"},
	{"Name or service not known", "no-such-host"}, {"Temporary failure in name resolution", "no-such-host"},
	{"Could not resolve host", "no-such-host"}, {"No such file or directory", "ENOENT"}, {"command not found", "ENOENT"},
}

func errnoOf(stderr string) string {
	for _, m := range messages {
		if strings.Contains(stderr, m.text) {
			return m.name
		}
	}
	return "unexplained failure"
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// dial is a command that opens a TCP connection with bash's /dev/tcp; it prints "connected".
func dial(host string, port int) string {
	return fmt.Sprintf("timeout 4 bash -c 'exec 3<>/dev/tcp/%s/%d' && echo connected", host, port)
}

func (s shell) doors() []sidedoor.Door {
	tok := token()
	f := ".shellprobe-" + tok
	key := fakeKey()
	return []sidedoor.Door{
		{Name: "bash/echo", Expected: "ok", Why: "the tool runs a command and returns its output", Limit: 20 * time.Second,
			Try: s.try("analyse", "echo ok", 10, stdout)},
		{Name: "bash/analyse-network", Expected: "no network", Why: "analyse has an empty network namespace: nothing to reach, nothing to leak to", Limit: 20 * time.Second,
			Try: s.try("analyse", "ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); curl -sS --max-time 3 -o /dev/null http://net:3128/ 2>/dev/null; echo \"curl=$? ifaces=$ifaces\"",
				10, func(o output) (string, string) {
					f := sidedoor.Fields(o.Stdout)
					if f["curl"] != "0" && f["ifaces"] == "lo," {
						return "no network", o.Stdout
					}
					return "network", strings.TrimSpace(o.Stdout)
				})},
		{Name: "bash/analyse-write-workspace", Expected: "EROFS|EACCES", Why: "analyse's workspace is read-only", Limit: 20 * time.Second,
			Try: s.try("analyse", "echo x > "+f, 10, failed)},
		{Name: "bash/build-write-workspace", Expected: "read back", Why: "build's workspace is writable, and what it writes stays", Limit: 30 * time.Second,
			Try: func(ctx context.Context) (string, string) {
				if o, r, err := s.call(ctx, map[string]any{"command": "echo " + tok + " > " + f, "profile": "build"}); err != nil || r != "" || o.ExitCode != 0 {
					return "build could not write", fmt.Sprintf("%v %s %s", err, r, o.Stderr)
				}
				defer s.call(context.WithoutCancel(ctx), map[string]any{"command": "rm -f " + f, "profile": "build"})
				if o, r, err := s.call(ctx, map[string]any{"command": "cat " + f}); err != nil || r != "" || strings.TrimSpace(o.Stdout) != tok {
					return "not read back", fmt.Sprintf("%v %s %q %s", err, r, o.Stdout, o.Stderr)
				}
				return "read back", ""
			}},
		{Name: "bash/exec-workspace", Expected: "EACCES", Why: "nothing written can be executed: the workspace is noexec and Landlock grants no execute there", Limit: 20 * time.Second,
			Try: s.try("build", "printf '#!/bin/sh\\necho ran\\n' > "+f+".sh && chmod +x "+f+".sh && ./"+f+".sh; rc=$?; rm -f "+f+".sh; exit $rc", 10, failed)},
		{Name: "bash/exec-tmp", Expected: "EACCES", Why: "nothing written can be executed: /tmp is noexec and Landlock grants no execute there", Limit: 20 * time.Second,
			Try: s.try("analyse", "printf '#!/bin/sh\\necho ran\\n' > /tmp/x.sh && chmod +x /tmp/x.sh && /tmp/x.sh", 10, failed)},
		{Name: "bash/reach-llm", Expected: "EACCES|no-such-host|no-answer|ENETUNREACH|EHOSTUNREACH", Why: "build connects to the proxy's port only; llm is not on bash's networks", Limit: 20 * time.Second,
			Try: s.try("build", dial("llm", 8080), 10, failed)},
		{Name: "bash/reach-kms", Expected: "EACCES|no-such-host|no-answer|ENETUNREACH|EHOSTUNREACH", Why: "build connects to the proxy's port only; kms is not on bash's networks", Limit: 20 * time.Second,
			Try: s.try("build", dial("kms", 8443), 10, failed)},
		{Name: "bash/reach-net-mtls", Expected: "EACCES", Why: "Landlock lets build connect to port 3128 only, even on net", Limit: 20 * time.Second,
			Try: s.try("build", dial("net", 3129), 10, failed)},
		{Name: "bash/reach-own-server", Expected: "EACCES", Why: "build shares the container's network, where bash listens: Landlock refuses the port", Limit: 20 * time.Second,
			Try: s.try("build", dial("127.0.0.1", 8090), 10, failed)},
		{Name: "bash/reach-net", Expected: "net answered", Why: "build's one way out is net's proxy, which answers (a 403 with X-Sharness-Deny for a host bash may not reach)", Limit: 20 * time.Second,
			Try: s.try("build", "curl -sS --max-time 5 -o /dev/null -D - http://shellprobe.invalid/", 10, func(o output) (string, string) {
				if status, _, _ := strings.Cut(o.Stdout, "\r\n"); strings.HasPrefix(status, "HTTP/") {
					return "net answered", status + " " + header(o.Stdout, "X-Sharness-Deny")
				}
				return "no answer", lastLine(o.Stderr)
			})},
		{Name: "bash/net-refusal-said", Expected: "said", Why: "curl shows only \"CONNECT tunnel failed, response 403\": the tool's result must say that net refused the request, and by which rule, or a person cannot tell the harness working from the harness broken", Limit: 20 * time.Second,
			Try: s.try("build", "curl -sS --max-time 5 -o /dev/null https://shellprobe.invalid/", 10, func(o output) (string, string) {
				_, said, _ := strings.Cut(o.Text, "net refused ")
				if strings.Contains(said, "CONNECT shellprobe.invalid:443: rule ") {
					return "said", lastLine(o.Text)
				}
				return "not said", lastLine(o.Text)
			})},
		{Name: "bash/other-processes", Expected: "own pids only", Why: "the sandbox's pid namespace holds its init and the command: the server and other sandboxes are invisible", Limit: 20 * time.Second,
			Try: s.try("analyse", "cd /proc && set -- [0-9]* && echo $# $*", 10, func(o output) (string, string) {
				if n, _ := strconv.Atoi(strings.Fields(o.Stdout + " x")[0]); n >= 1 && n <= 3 {
					return "own pids only", o.Stdout
				}
				return "sees other processes", o.Stdout
			})},
		{Name: "bash/signal-init", Expected: "contained", Why: "pid 1 is the sandbox's own init, which ignores SIGKILL from inside: the call ends as the sandbox's and the server lives on", Limit: 20 * time.Second,
			Try: func(ctx context.Context) (string, string) {
				o, r, err := s.call(ctx, map[string]any{"command": "kill -9 1; echo alive"})
				if err != nil || r != "" || strings.TrimSpace(o.Stdout) != "alive" {
					return "not contained", fmt.Sprintf("%v %s %q", err, r, o.Stdout)
				}
				if o, _, err := s.call(ctx, map[string]any{"command": "echo ok"}); err != nil || o.Stdout != "ok\n" {
					return "server gone", fmt.Sprint(err)
				}
				return "contained", ""
			}},
		{Name: "bash/identity-socket", Expected: "absent", Why: "/run is an empty tmpfs in the sandbox: bash's SPIFFE socket is not there", Limit: 20 * time.Second,
			Try: s.try("build", "test -e /run/sharness/identity && echo present || echo absent", 10, stdout)},
		{Name: "bash/mount", Expected: "EPERM", Why: "commands hold no capability: a tmpfs could hide the protected paths", Limit: 20 * time.Second,
			Try: s.try("build", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", 10, failed)},
		{Name: "bash/unshare-user", Expected: "EPERM", Why: "a new user namespace would give commands every capability again", Limit: 20 * time.Second,
			Try: s.try("build", "unshare -U true", 10, failed)},
		{Name: "bash/unshare-root", Expected: "EPERM", Why: "a new user namespace would give commands every capability again", Limit: 20 * time.Second,
			Try: s.try("build", "unshare -Ur true", 10, failed)},
		{Name: "bash/setns", Expected: "EPERM", Why: "setns would join another namespace", Limit: 20 * time.Second,
			Try: s.try("build", "nsenter -t $$ -m true", 10, failed)},
		{Name: "bash/ptrace", Expected: "EPERM", Why: "tracing reads and steers other processes", Limit: 20 * time.Second,
			Try: s.try("build", "strace -f true", 10, failed)},
		{Name: "bash/write-git-hooks", Expected: "EROFS", Why: "a hook would run outside the sandbox, in a person's git", Limit: 20 * time.Second,
			Try: s.try("build", "echo x > /workspace/.git/hooks/pre-commit", 10, failed)},
		{Name: "bash/write-claude", Expected: "EROFS", Why: "agent settings are protected paths", Limit: 20 * time.Second,
			Try: s.try("build", "echo x > /workspace/.claude/x", 10, failed)},
		{Name: "bash/rename-git", Expected: "EBUSY", Why: ".git is a mount point: renaming it away would drop its protections", Limit: 20 * time.Second,
			Try: s.try("build", "mv /workspace/.git /workspace/.git-shellprobe", 10, failed)},
		{Name: "bash/planted-secret", Expected: "redacted", Why: "a key a command prints never reaches the agent", Limit: 20 * time.Second,
			Try: s.try("analyse", "echo "+key, 10, func(o output) (string, string) {
				if strings.Contains(o.Stdout, key[20:60]) {
					return "leaked", ""
				}
				if len(o.Redacted) == 0 {
					return "gone, no redaction reported", o.Stdout
				}
				return "redacted", strings.Join(o.Redacted, ",")
			})},
		s.invalid("profile", map[string]any{"command": "id", "profile": "root"}),
		s.invalid("command", map[string]any{"profile": "analyse"}),
		s.invalid("cwd", map[string]any{"command": "id", "cwd": "../etc"}),
		s.invalid("timeout", map[string]any{"command": "id", "timeout": 0}),
		{Name: "bash/admin-profile", Expected: "approval_unavailable", Why: "each admin command needs a person's approval, and this stack has no operator key", Limit: 20 * time.Second,
			Try: func(ctx context.Context) (string, string) {
				_, r, err := s.call(ctx, map[string]any{"command": "id", "profile": "admin"})
				if reason, _, ok := strings.Cut(strings.TrimPrefix(r, "refused: "), ":"); err == nil && ok && strings.HasPrefix(reason, "approval_") {
					return reason, r
				}
				return "not refused for approval", fmt.Sprintf("%v %s", err, r)
			}},
	}
}

// invalid is a door for arguments bash must refuse, naming the argument at fault.
func (s shell) invalid(field string, args map[string]any) sidedoor.Door {
	want := "refused naming " + field
	return sidedoor.Door{Name: "bash/invalid-" + field, Expected: want, Why: "malformed arguments are refused, with the argument named", Limit: 20 * time.Second,
		Try: func(ctx context.Context) (string, string) {
			_, r, err := s.call(ctx, args)
			text := r
			if err != nil {
				text = err.Error()
			}
			if (err != nil || r != "") && strings.Contains(text, strconv.Quote(field)) {
				return want, text
			}
			return "not refused by name", text
		}}
}

// heavyDoors load bash's container: they run last, one at a time.
func (s shell) heavyDoors() []sidedoor.Door {
	return []sidedoor.Door{
		{Name: "bash/fork-bomb", Expected: "EAGAIN, next call ok", Why: "a sandbox's process limit stops a fork bomb, and the next command runs", Limit: 60 * time.Second,
			Try: func(ctx context.Context) (string, string) {
				got, note := s.try("analyse", ":(){ :|:& };:; sleep 5", 10, func(o output) (string, string) { return errnoOf(o.Stderr), lastLine(o.Stderr) })(ctx)
				if o, _, err := s.call(ctx, map[string]any{"command": "echo ok"}); err != nil || o.Stdout != "ok\n" {
					return got + ", next call failed", fmt.Sprint(err)
				}
				return got + ", next call ok", note
			}},
		{Name: "bash/runaway", Expected: "timed out promptly", Why: "a timeout kills the whole sandbox, background processes too", Limit: 30 * time.Second,
			Try: func(ctx context.Context) (string, string) {
				start := time.Now()
				got, note := s.try("analyse", "sleep 1000 & sleep 1000", 2, func(o output) (string, string) {
					return fmt.Sprintf("timed_out=%v", o.TimedOut), o.Signal
				})(ctx)
				if took := time.Since(start); got == "timed_out=true" && took < 10*time.Second {
					return "timed out promptly", took.String()
				}
				return got, note
			}},
		{Name: "bash/output-100mb", Expected: "truncated, total reported", Why: "output beyond the cap is counted and dropped, never silently", Limit: 90 * time.Second,
			Try: s.try("analyse", "yes | head -c 100000000", 60, func(o output) (string, string) {
				if o.StdoutTruncated && o.StdoutBytes == 100000000 && len(o.Stdout) <= 1<<20 {
					return "truncated, total reported", fmt.Sprintf("%d kept", len(o.Stdout))
				}
				return fmt.Sprintf("truncated=%v bytes=%d", o.StdoutTruncated, o.StdoutBytes), ""
			})},
	}
}

// header is the value of the named header in a raw HTTP response head.
func header(head, name string) string {
	for _, l := range strings.Split(head, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func token() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// fakeKey is shaped like an Anthropic API key ("sk-ant-api03-", 93 characters, "AA"), made
// at run time so that no key is in the source or the binary.
func fakeKey() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	b := make([]byte, 93)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "sk-ant-api03-" + string(b) + "AA"
}
