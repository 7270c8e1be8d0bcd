package secretfilter

import "bytes"

// catN returns the view of parent with a line-number gutter removed from each line that has one:
// spaces, a decimal number, then a tab (cat -n, nl, and Claude Code's Read tool, which prints
// "N\t" before each line of a file) or the arrow "→" some versions of it print. Nil unless two
// lines or more, and at least half of them, have it. Without this view a dump or a wrapped value
// read by such a tool hides behind its gutter: each line of xxd then starts with a number, not
// an offset, and a wrapped value continues after one (issue 21; found with Claude Code 2.1.332's
// Read in e2e TestClaudeCodeStack/planted-formats). A line of the file that itself starts so
// loses its first column, which can only cost a match of that view; the text's own view is read
// as well.
func catN(parent *view) *view {
	text := parent.dec
	lines, marked := 0, 0
	for i := 0; i < len(text); {
		j := indexByteFrom(text, i, '\n')
		if j < 0 {
			j = len(text)
		}
		lines++
		if gutter(text[i:j]) > 0 {
			marked++
		}
		i = j + 1
	}
	if marked < 2 || 2*marked < lines {
		return nil
	}
	b := newBuilder(parent, len(text))
	for i := 0; i < len(text); {
		j := indexByteFrom(text, i, '\n')
		if j < 0 {
			j = len(text) - 1
		}
		k := i + gutter(text[i:j+1]) // the gutter, if any, is dropped
		b.lit(text[k:j+1], k)
		i = j + 1
	}
	return b.done()
}

// arrow is "→" (U+2192) in UTF-8.
var arrow = []byte("\u2192")

// gutter returns the length of line's line-number gutter, 0 if it has none.
func gutter(line []byte) int {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	d := i
	for i < len(line) && '0' <= line[i] && line[i] <= '9' {
		i++
	}
	switch {
	case i == d || i-d > 9:
		return 0
	case i < len(line) && line[i] == '\t':
		return i + 1
	case bytes.HasPrefix(line[i:], arrow):
		return i + len(arrow)
	}
	return 0
}
