//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The planted credentials: a realistic AWS key pair and a GitHub token (issue 21), in the file a
// repository might carry.
const (
	plantedKeyID  = "AKIAQYLPMN5HHHFPZAM2"
	plantedSecret = "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"
	plantedToken  = "ghp_R8mK2vQ9xL4tN7wP1sZ6yB3cF5hJ0dG8aE2u"
)

func plantedFile(id, secret, token string) string {
	return "[default]\naws_access_key_id = " + id + "\naws_secret_access_key = " + secret + "\nregion = eu-west-1\n\n[ci]\ngithub_token = " + token + "\n"
}

// plantedFormat is one shape a tool prints a file in: the real tool's output on this host
// (shell, run on the plain file), or a transformation no single tool makes (zero-width spaces,
// JSON escapes).
type plantedFormat struct {
	name  string
	shell string              // the host command over "$1", the plain file
	apply func(string) string // else this
}

var plantedFormats = []plantedFormat{
	{name: "plain", shell: `cat "$1"`},
	{name: "wrapped", shell: `fold -w 16 "$1"`},
	{name: "pasted", shell: `fold -w 16 "$1" | paste -sd ""`},
	{name: "od-c", shell: `od -An -c "$1"`},
	{name: "od-x", shell: `od -An -x "$1"`},
	{name: "xxd", shell: `xxd "$1"`},
	{name: "hexdump-C", shell: `hexdump -C "$1"`},
	{name: "base64-wrapped", shell: `base64 -w 40 "$1"`},
	// grep's colour around the match: "= \x1b[01;31m\x1b[KAKIA\x1b[m\x1b[KQYLP…", the 'K'
	// before the key and the split inside it hid it from every rule before the filter removed
	// terminal escapes (an attack on llm).
	{name: "grep-color", shell: `grep --color=always -n -E 'AKIA|ghp_|= q7|region' "$1"`},
	{name: "cat-A-grep-color", shell: `grep --color=always -E 'AKIA|ghp_|= q7|region' "$1" | cat -A`},
	{name: "zero-width", apply: func(s string) string { // a zero-width space between groups of 4
		for _, v := range []string{plantedKeyID, plantedSecret, plantedToken} {
			var z strings.Builder
			for i, r := range v {
				if i > 0 && i%4 == 0 {
					z.WriteString("\u200b")
				}
				z.WriteRune(r)
			}
			s = strings.ReplaceAll(s, v, z.String())
		}
		return s
	}},
	{name: "json-escapes", apply: func(s string) string {
		var b strings.Builder
		for _, r := range s {
			if r == '\n' {
				b.WriteString("\\n\n")
				continue
			}
			fmt.Fprintf(&b, "\\u%04x", r)
		}
		return b.String()
	}},
}

// render is format f of content, made by the real tool on this host where f names one.
func (f plantedFormat) render(t *testing.T, content string) string {
	t.Helper()
	if f.apply != nil {
		return f.apply(content)
	}
	in := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(in, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", f.shell, "sh", in).Output()
	if err != nil {
		t.Fatalf("%s on the host: %v", f.shell, err)
	}
	return string(out)
}

// secretLines are the lines of format f that hold a planted secret's bytes: those that the same
// format of the same file, with each secret replaced by as many x's, does not print (anywhere: a
// grep prints fewer lines of it). None of them may reach the model, whole or in part, however
// the filter treats the rest.
func (f plantedFormat) secretLines(t *testing.T) (rendered string, lines []string) {
	t.Helper()
	rendered = f.render(t, plantedFile(plantedKeyID, plantedSecret, plantedToken))
	x := func(s string) string { return strings.Repeat("x", len(s)) }
	dummy := strings.Split(f.render(t, plantedFile(x(plantedKeyID), x(plantedSecret), x(plantedToken))), "\n")
	for _, l := range strings.Split(rendered, "\n") {
		if !slices.Contains(dummy, l) {
			if l = strings.TrimSpace(l); len(l) >= 8 {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		t.Fatalf("format %s: no line holds a secret: the check could not fail", f.name)
	}
	return rendered, lines
}

// leaked reports, for each recorded request, the strings of its JSON body (the model reads those,
// not the escapes) that hold one of lines, or one of the planted values with the format's own
// spacing removed.
func leaked(t *testing.T, lines []string) (out []string, redacted bool) {
	t.Helper()
	for _, r := range record(t) {
		var v any
		if err := json.Unmarshal([]byte(r.Body), &v); err != nil {
			t.Fatalf("request %d: the recorded body is not JSON: %v", r.Seq, err)
		}
		var texts []string
		walkStrings(v, func(s string) { texts = append(texts, s) })
		all := strings.Join(texts, "\n")
		redacted = redacted || strings.Contains(all, "[REDACTED:")
		squeezed := strings.NewReplacer(" ", "", "\t", "", "\n", "", "\u200b", "").Replace(all)
		for _, l := range lines {
			if strings.Contains(all, l) {
				out = append(out, fmt.Sprintf("request %d holds the line %q", r.Seq, l))
			}
		}
		for _, p := range []string{plantedKeyID, plantedSecret, plantedToken} {
			if strings.Contains(squeezed, p) {
				out = append(out, fmt.Sprintf("request %d holds %.8s… (spacing removed)", r.Seq, p))
			}
		}
	}
	return out, redacted
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

// checkPlantedFormats plants each format in the workspace ws and has Claude Code (run by claude,
// which returns its output and whether it exited 0) read it with its Read tool and print it with
// the bash MCP tool: through Read, llm must refuse the request that carries it, naming the rule;
// through bash, bash redacts it (or llm refuses); either way no line of it reaches the model.
func checkPlantedFormats(t *testing.T, ws string, claude func(args ...string) (string, error)) {
	for _, f := range plantedFormats {
		t.Run(f.name, func(t *testing.T) {
			rendered, lines := f.secretLines(t)
			name := "planted-" + f.name + ".txt"
			path := filepath.Join(ws, name)
			if err := os.WriteFile(path, []byte(rendered), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			if err := os.Chown(path, workspaceUID, workspaceUID); err != nil {
				t.Fatal(err)
			}
			t.Run("read", func(t *testing.T) {
				clearRecord(t)
				out, err := claude("-p", `use tool Read {"file_path":"/workspace/`+name+`"}`)
				if err == nil || !strings.Contains(out, "API Error: 400 llm: the secret filter matched") {
					t.Errorf("llm did not refuse the request carrying the file (exit error %v):\n%s", err, out)
				}
				found, _ := leaked(t, lines)
				for _, l := range found {
					t.Error(l)
				}
			})
			t.Run("bash", func(t *testing.T) {
				clearRecord(t)
				out, err := claude("-p", `use tool mcp__bash__bash {"command":"cat /workspace/`+name+`"}`)
				refused := strings.Contains(out, "API Error: 400 llm: the secret filter matched")
				if err != nil && !refused {
					t.Errorf("claude -p failed, and not by llm's refusal: %v\n%s", err, out)
				}
				found, redacted := leaked(t, lines)
				if !refused && !redacted {
					t.Errorf("llm did not refuse, and no request to the model holds a redaction:\n%s", out)
				}
				for _, l := range found {
					t.Error(l)
				}
			})
		})
	}
}

// workspaceOf is the host folder s binds as the workspace.
func workspaceOf(s *stack) string {
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "SHARNESS_AI_WORKSPACE="); ok {
			return v
		}
	}
	s.t.Fatal("the stack has no SHARNESS_AI_WORKSPACE")
	return ""
}
