package secretfilter

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// withGutter is text as a tool that numbers lines prints it: Claude Code's Read ("N\t", no
// padding), cat -n ("%6d\t") or the arrow some versions of Read print.
func withGutter(text []byte, format string) []byte {
	var b bytes.Buffer
	for i, line := range bytes.SplitAfter(text, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if strings.Contains(format, "%") {
			fmt.Fprintf(&b, format, i+1)
		} else {
			b.WriteString(format)
		}
		b.Write(line)
	}
	return b.Bytes()
}

// TestToolCorpusWithGutter: every captured tool output of the corpus, read through a tool that
// numbers its lines, is found by the same rules as without the numbers, and redacted: a dump
// or a wrapped value does not hide behind a line-number gutter (found with Claude Code's Read
// on the real stack: e2e TestClaudeCodeStack/planted-formats).
func TestToolCorpusWithGutter(t *testing.T) {
	f := newTestFilter(t)
	for _, tc := range loadToolCorpus(t) {
		for _, g := range []string{"%d\t", "%6d\t", "%6d\u2192", "%4d| ", "%d:", "%4d  "} {
			name := fmt.Sprintf("%s/%s/%q", tc.format, tc.source, g)
			t.Run(name, func(t *testing.T) {
				text := withGutter(tc.text, g)
				want := slices.Compact(slices.Sorted(slices.Values(ruleNames(f.Scan(tc.text)))))
				got := slices.Compact(slices.Sorted(slices.Values(ruleNames(f.Scan(text)))))
				for _, r := range want {
					if !slices.Contains(got, r) {
						t.Errorf("rule %s finds the secret without the gutter, not with it (got %v)", r, got)
					}
				}
				if len(tc.want) == 0 && len(got) > 0 {
					t.Errorf("source without secrets: hits %v", got)
				}
				if out, _ := f.Redact(text); len(f.Scan(out)) > 0 {
					t.Errorf("Redact left hits %v", f.Scan(out))
				}
			})
		}
	}
}

func TestGutter(t *testing.T) {
	for _, tt := range []struct {
		line string
		want int
	}{
		{"1\tx", 2}, {"     12\tx", 8}, {"3\u2192x", 4}, {"  7\u2192", 6}, {"  7\u2192 x", 6},
		{"   3| d", 5}, {"1:AKIA", 2}, {"12: x", 3}, {"   4  x", 6}, {"+x", 0}, {"> x", 0},
		{"x\t1", 0}, {"\tx", 0}, {"12 x", 0}, {"1234567890\tx", 0}, {"", 0}, {"  \t", 0}, {"12", 0}, {"-x", 0},
	} {
		if got := gutter([]byte(tt.line)); got != tt.want {
			t.Errorf("gutter(%q) = %d, want %d", tt.line, got, tt.want)
		}
	}
	// One numbered line in three is not a gutter: the text's own view is all there is.
	if v := catN(&view{dec: []byte("1\ta\nb\nc\n")}, false); v != nil {
		t.Errorf("catN of one numbered line in three: %q, want nil", v.dec)
	}
	v := catN(&view{dec: []byte("1\tab\n2\tcd\nef")}, false)
	if v == nil || string(v.dec) != "ab\ncd\nef" {
		t.Fatalf("catN: %v", v)
	}
	if v := catN(&view{dec: []byte("1| a\n2| b\n")}, true); v == nil || string(v.dec) != "a\nb\n" || !spaceAfter([]byte("1| a\n")) || spaceAfter([]byte("1\ta\n")) {
		t.Errorf("catN with the space after: %v", v)
	}
}
