package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxREADMELines keeps the README a front door; reference material lives in docs/ (issue 18).
const maxREADMELines = 200

// TestREADMELength fails when the README grows past maxREADMELines.
func TestREADMELength(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, want at most %d: move reference material into docs/", n, maxREADMELines)
	}
}

// TestDocLinks fails when a relative link in README.md or docs/*.md names a file that does not
// exist, or a #anchor that is no heading of the Markdown file it points at.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(repoRoot, "README.md")}, files...)
	for _, problem := range checkLinks(repoRoot, files) {
		t.Error(problem)
	}
}

// TestCheckLinksFails holds that the checker sees each kind of broken link, on a tree of its own.
func TestCheckLinksFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## Known gaps\n\n```sh\n# not a heading\n```\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[fine](docs/a.md#known-gaps) [self](#top) ![pic](docs/a.md) [web](https://example.com/x)",
		"[no file](docs/missing.md)",
		"[no anchor](docs/a.md#unknown-gaps)",
		"[code heading](docs/a.md#not-a-heading)",
		"[no self anchor](#bottom)",
		"[outside](../elsewhere.md)",
		"`[in code](docs/missing-too.md)`",
		"```",
		"[in a block](docs/missing-three.md)",
		"```",
	}, "\n"))
	got := checkLinks(dir, []string{filepath.Join(dir, "README.md")})
	want := []string{
		"README.md:3: docs/missing.md: no such file",
		"README.md:4: docs/a.md#unknown-gaps: no heading with that anchor in docs/a.md",
		"README.md:5: docs/a.md#not-a-heading: no heading with that anchor in docs/a.md",
		"README.md:6: #bottom: no heading with that anchor in README.md",
		"README.md:7: ../elsewhere.md: outside the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("checkLinks:\ngot  %q\nwant %q", got, want)
	}
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ name, heading, want string }{
		{"plain", "Known gaps", "known-gaps"},
		{"punctuation", "The runtime shim: Setting and Boundary", "the-runtime-shim-setting-and-boundary"},
		{"code and hyphens", "--agent IMAGE", "--agent-image"},
		{"backticks", "The model path: what `llm` admits", "the-model-path-what-llm-admits"},
		{"apostrophe", "Against the peer Sanctuary's promises", "against-the-peer-sanctuarys-promises"},
		{"parentheses", "The wall (built)", "the-wall-built"},
		{"underscore kept", "max_pids and A/B", "max_pids-and-ab"},
		{"link text", "See [cli.md](cli.md) now", "see-climd-now"},
		{"numbered", "1. `runc <command> -h` was refused: fixed in args.go", "1-runc-command--h-was-refused-fixed-in-argsgo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := anchor(tc.heading); got != tc.want {
				t.Errorf("anchor(%q) = %q, want %q", tc.heading, got, tc.want)
			}
		})
	}
}

var (
	// inlineLink is [text](target) and ![alt](target), with an optional "title" after the target.
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	codeSpan    = regexp.MustCompile("`+[^`]*`+")
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	urlScheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkLinks reads each Markdown file and returns one line per broken relative link:
// "file:line: target: why", the file relative to root.
func checkLinks(root string, files []string) []string {
	var problems []string
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = headingAnchors(string(data))
		return anchors[path], nil
	}
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		data, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		for n, line := range proseLines(string(data)) {
			if line == "" {
				continue
			}
			for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if urlScheme.MatchString(target) {
					continue
				}
				bad := func(why string) {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", rel, n+1, target, why))
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if r, err := filepath.Rel(root, dest); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
						bad("outside the repository")
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						bad("no such file")
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue // anchors into other files (#L12 of a source file) are GitHub's own
				}
				a, err := anchorsOf(dest)
				if err != nil {
					bad(err.Error())
					continue
				}
				if !a[frag] {
					destRel, _ := filepath.Rel(root, dest)
					bad("no heading with that anchor in " + filepath.ToSlash(destRel))
				}
			}
		}
	}
	return problems
}

// proseLines splits text into lines, blanking those inside fenced code blocks, so that line
// numbers stay true and neither links nor headings are read from code.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a Markdown text, a
// repeated heading getting -1, -2 and so on.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		m := atxHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor for a heading: its text (a link's text for a link) in lower case,
// punctuation but '-' and '_' removed, each space turned into '-'.
func anchor(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRunnableMarks: a `<!-- runnable` mark (e2e TestDocsRunnable runs the block after it) is
// followed by a ```sh block in every file, and the README has one: without engine or root, so
// that a mark that would run nothing fails here first.
func TestRunnableMarks(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	files = append(files, filepath.Join(repoRoot, "README.md"))
	marks := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "<!-- runnable") {
				marks[filepath.Base(f)]++
				if i+1 >= len(lines) || lines[i+1] != "```sh" {
					t.Errorf("%s:%d: a runnable mark not followed by a ```sh block", f, i+1)
				}
			}
		}
	}
	if marks["README.md"] == 0 || marks["operator.md"] == 0 {
		t.Errorf("runnable blocks: %v, want README.md's and operator.md's", marks)
	}
}
