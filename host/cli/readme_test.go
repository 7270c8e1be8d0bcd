package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEExamples runs every `$ sharness-ai …` line of the console blocks of the README and
// docs/cli.md (where the CLI's examples live since issue 18), in order, against a copy of the
// repository, and compares what it prints (stdout then stderr) with the lines that follow it.
// In the expected text, <hash> stands for any sha256:<64 hex>, <pin> for a pinned key
// (ed25519:<base64>), a line "..." for any number of lines, and a last line "[exit N]" for the
// exit code (0 when absent).
func TestREADMEExamples(t *testing.T) {
	var examples []example
	for _, doc := range []string{"README.md", "docs/cli.md"} {
		text, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(doc)))
		if err != nil {
			t.Fatal(err)
		}
		examples = append(examples, parseExamples(string(text))...)
	}
	if len(examples) < 5 {
		t.Fatalf("found %d README examples; the parser is not finding them", len(examples))
	}
	copyTree(t, "policies", "docker-compose.yml", "compiled")
	for _, ex := range examples {
		code, out, errOut := run(t, strings.Fields(ex.cmd)...)
		got := out + errOut
		if code != ex.code || !ex.want.MatchString(got) {
			t.Errorf("README: $ sharness-ai %s\ngot exit %d:\n%s\nwant exit %d:\n%s", ex.cmd, code, got, ex.code, ex.text)
		}
	}
}

type example struct {
	cmd, text string
	want      *regexp.Regexp
	code      int
}

func parseExamples(readme string) []example {
	var out []example
	var cur *example
	var lines []string
	flush := func() {
		if cur == nil {
			return
		}
		if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "[exit ") {
			fmt.Sscanf(lines[n-1], "[exit %d]", &cur.code)
			lines = lines[:n-1]
		}
		var re strings.Builder
		re.WriteString(`^`)
		for _, l := range lines {
			if l == "..." {
				re.WriteString(`(?:.*\n)*`)
				continue
			}
			l = strings.Join(strings.Split(regexp.QuoteMeta(l), "<hash>"), `sha256:[0-9a-f]{64}`)
			re.WriteString(strings.Join(strings.Split(l, "<pin>"), `ed25519:[A-Za-z0-9+/]{43}=`) + `\n`)
		}
		re.WriteString(`$`)
		cur.text = strings.Join(lines, "\n")
		cur.want = regexp.MustCompile(re.String())
		out = append(out, *cur)
		cur, lines = nil, nil
	}
	inBlock := false
	for _, l := range strings.Split(readme, "\n") {
		switch {
		case strings.HasPrefix(l, "```console"):
			inBlock = true
		case inBlock && strings.HasPrefix(l, "```"):
			flush()
			inBlock = false
		case inBlock && strings.HasPrefix(l, "$ sharness-ai "):
			flush()
			cur = &example{cmd: strings.TrimPrefix(l, "$ sharness-ai ")}
		case inBlock && cur != nil:
			lines = append(lines, l)
		}
	}
	return out
}
