package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/secretfilter"
)

// tool serves the bash tool.
type tool struct {
	sb        *sandbox.Sandbox
	pol       policy
	workspace string
	filter    *secretfilter.Filter
	log       *slog.Logger
	rec       *audit.Writer // bash's audit log; nil records nothing
	gate      *gate.Gate    // asks the operator about each admin command; nil refuses them all
	watch     *netWatch     // net's refusals of the sandboxes' requests; nil without an edge to net
}

// output is the tool's structured result.
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

	stdoutKept, stderrKept int // bytes of each stream kept, before redaction
}

// inputSchema is part of every tool list a client sends the model, and so of the lists the
// default policy pins for Claude Code (business.llm.tools in L3-llm.yaml): a change to a byte of
// it is a change to those pins (TestInputSchemaIsPinned).
const inputSchema = `{"type":"object","additionalProperties":false,"required":["command"],"properties":{
"command":{"type":"string","minLength":1,"maxLength":65536,"description":"the shell command, run by /bin/bash -c"},
"profile":{"type":"string","enum":["analyse","build","admin"],"default":"analyse","description":"analyse: no network, workspace read-only; build: the proxy only, workspace read-write; admin: needs a person's approval"},
"timeout":{"type":"integer","minimum":1,"maximum":600,"default":60,"description":"seconds before the sandbox is killed"},
"cwd":{"type":"string","description":"working folder, relative to the workspace, without .."}}}`

const outputSchema = `{"type":"object","required":["exit_code","signal","stdout","stderr","stdout_bytes","stderr_bytes","stdout_truncated","stderr_truncated","timed_out","redacted"],"properties":{
"exit_code":{"type":"integer"},"signal":{"type":"string"},"stdout":{"type":"string"},"stderr":{"type":"string"},
"stdout_bytes":{"type":"integer"},"stderr_bytes":{"type":"integer"},"stdout_truncated":{"type":"boolean"},
"stderr_truncated":{"type":"boolean"},"timed_out":{"type":"boolean"},"redacted":{"type":"array","items":{"type":"string"}}}}`

func (t *tool) add(s *mcp.Server) {
	s.AddTool(&mcp.Tool{
		Name: "bash",
		Description: "Run one shell command in a fresh sandbox and return its exit code, stdout and stderr " +
			"(1 MiB each at most; secrets in them are redacted). Nothing but the workspace outlives the command.",
		InputSchema: json.RawMessage(inputSchema), OutputSchema: json.RawMessage(outputSchema),
	}, t.call)
}

// call runs one tool call. Invalid arguments are a protocol error (invalid params) naming the
// argument; a refused profile or a sandbox that could not start is a tool error with the
// reason; anything the command did is a result. An admin command first waits for the operator
// (the call stays open); a refusal is a tool error "refused: <the gate's reason>: ...".
func (t *tool) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	line := []any{"decision", "invalid"}
	defer func() {
		t.log.Info("bash command", line...)
		t.rec.Record(t.log, audit.FromAttrs("bash.command", line...))
	}()
	a, err := decodeArgs(req.Params.Arguments)
	if err == nil {
		err = checkCwd(t.workspace, a.Cwd)
	}
	if err != nil {
		var ae *argError
		if !errors.As(err, &ae) {
			line = []any{"decision", "failed", "error", err.Error()}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the workspace cannot be read"}
		}
		field := "other" // an unknown field's name is the agent's text, not ours to log
		if slices.Contains(fields, ae.field) {
			field = ae.field
		}
		line = append(line, "field", field)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	sum := sha256.Sum256([]byte(a.Command))
	line = []any{"profile", a.Profile, "command_len", len(a.Command), "command_sha256", hex.EncodeToString(sum[:])}
	if err := t.rec.Err(); err != nil { // no command that cannot be recorded (issue 22)
		line = append(line, "decision", "refused", "reason", "audit_unavailable", "error", err.Error())
		return errorResult("refused: audit_unavailable: bash cannot write its audit log, so it runs nothing: the person must free bash's audit volume and restart bash"), nil
	}
	d := sandbox.Decide(a.Profile, t.pol.profiles, t.pol.proxy)
	if !d.Allow && !d.Ask {
		line = append(line, "decision", "refused", "reason", d.Reason)
		return errorResult("refused: " + d.Reason), nil
	}
	spec := sandbox.Spec{Command: a.Command, Profile: a.Profile, Timeout: a.Timeout, Cwd: a.Cwd,
		Workspace: t.workspace, ProxyAddr: t.pol.proxy, Hide: t.pol.hide}
	if d.Ask { // admin: the operator approves exactly this spec, or it does not run
		canonical, summary, err := sandbox.AdminRequest(spec)
		if err != nil { // nobody is asked about what they could not read whole
			line = append(line, "decision", "refused", "reason", "admin_request: "+err.Error())
			return errorResult("refused: admin_request: " + err.Error()), nil
		}
		v, _ := t.gate.Ask(ctx, sandbox.AdminAction, canonical, summary) // the gate logs a refusal's cause
		line = append(line, "approval", v.Reason(), "approval_id", v.ID())
		if !v.Approved() {
			line = append(line, "decision", "refused", "reason", string(v.Reason())) // the cause: the gate's own line
			return errorResult(fmt.Sprintf("refused: %s: the admin profile needs a person's approval of each command: %s", v.Reason(), v.Reason().Text())), nil
		}
		spec.Approval = v.ID()
	}
	started := time.Now()
	res, err := t.sb.Run(ctx, spec)
	if err != nil {
		line = append(line, "decision", "failed", "error", err.Error(), "duration_ms", res.Duration.Milliseconds())
		return errorResult("the sandbox could not run the command: " + err.Error()), nil
	}
	out := t.redact(res)
	line = append(line, "decision", "ran", "exit_code", out.ExitCode, "signal", out.Signal, "duration_ms", res.Duration.Milliseconds(),
		"stdout_bytes", out.StdoutBytes, "stderr_bytes", out.StderrBytes, "stdout_truncated", out.StdoutTruncated,
		"stderr_truncated", out.StderrTruncated, "timed_out", out.TimedOut, "redactions", len(out.Redacted))
	// net's refusals while it ran, in a plain line the model and the person read (through the
	// filter too: a URL may carry a key).
	text := summary(out, a)
	if refused := t.watch.since(started); len(refused) > 0 {
		said, _ := t.filter.Redact([]byte(netLines(refused)))
		text += string(said)
		line = append(line, "net_refusals", len(refused))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
}

// redact passes both streams through the secret filter: a key a command prints never reaches
// the agent. Redacted lists the rules that matched, once each.
func (t *tool) redact(r sandbox.Result) output {
	stdout, h1 := t.filter.Redact(r.Stdout)
	stderr, h2 := t.filter.Redact(r.Stderr)
	rules := []string{}
	for _, h := range append(h1, h2...) {
		if !slices.Contains(rules, h.Rule) {
			rules = append(rules, h.Rule)
		}
	}
	slices.Sort(rules)
	return output{ExitCode: r.ExitCode, Signal: r.Signal, Stdout: printable(stdout), Stderr: printable(stderr),
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated, TimedOut: r.TimedOut, Redacted: rules,
		stdoutKept: len(r.Stdout), stderrKept: len(r.Stderr)}
}

// printable is b as text for a model: invalid UTF-8 and control characters but tab, newline
// and carriage return become U+FFFD. JSON would spell each control character as a six-byte
// escape, both in the structured result and in the text: a MiB of NULs cost a second of CPU
// between this server and its client.
//
// It is strings.Map over strings.ToValidUTF8(string(b), "\uFFFD") (each run of invalid bytes
// one U+FFFD, each control character one; FuzzPrintable holds them equal) in one pass that
// copies runs of plain ASCII whole: a MiB of text costs one copy, not a decode of every rune.
func printable(b []byte) string {
	i := plainPrefix(b)
	if i == len(b) {
		return string(b)
	}
	var out strings.Builder
	out.Grow(len(b) + 2*utf8.UTFMax)
	out.Write(b[:i])
	invalid := false // the last byte written was part of a run of invalid UTF-8
	for i < len(b) {
		if n := plainPrefix(b[i:]); n > 0 {
			out.Write(b[i : i+n])
			i, invalid = i+n, false
			continue
		}
		if c := b[i]; c < utf8.RuneSelf { // a control character
			out.WriteRune(utf8.RuneError)
			i, invalid = i+1, false
			continue
		}
		_, n := utf8.DecodeRune(b[i:])
		if n == 1 { // invalid: a run of them is one U+FFFD, as in strings.ToValidUTF8
			if !invalid {
				out.WriteRune(utf8.RuneError)
			}
			i, invalid = i+1, true
			continue
		}
		out.Write(b[i : i+n]) // any valid rune at or above U+0080 stays
		i, invalid = i+n, false
	}
	return out.String()
}

// plain are the bytes printable keeps as they are: printable ASCII, tab, newline, carriage return.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\t'], t['\n'], t['\r'] = true, true, true
	return t
}()

// plainPrefix returns the length of b's longest prefix of plain bytes.
func plainPrefix(b []byte) int {
	for i, c := range b {
		if !plain[c] {
			return i
		}
	}
	return len(b)
}

// summary is the text a model reads: the exit code, the streams, and a line for each thing
// it must not miss (truncation, a timeout, redactions).
func summary(o output, a args) string {
	var b strings.Builder
	b.Grow(len(o.Stdout) + len(o.Stderr) + 256) // a MiB of output is copied once, not once per doubling
	fmt.Fprintf(&b, "exit code: %d", o.ExitCode)
	if o.Signal != "" {
		fmt.Fprintf(&b, " (%s)", o.Signal)
	}
	b.WriteString("\n")
	if o.TimedOut {
		fmt.Fprintf(&b, "timed out after %v: the sandbox was killed\n", a.Timeout)
	}
	for _, s := range []struct {
		name, text  string
		total, kept int64
		truncated   bool
	}{{"stdout", o.Stdout, o.StdoutBytes, int64(o.stdoutKept), o.StdoutTruncated}, {"stderr", o.Stderr, o.StderrBytes, int64(o.stderrKept), o.StderrTruncated}} {
		if s.total == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", s.name, s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteString("\n")
		}
		if s.truncated {
			fmt.Fprintf(&b, "[%s truncated: %d bytes written, the first %d kept]\n", s.name, s.total, s.kept)
		}
	}
	if len(o.Redacted) > 0 {
		fmt.Fprintf(&b, "[redacted secrets matching: %s]\n", strings.Join(o.Redacted, ", "))
	}
	return b.String()
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}
