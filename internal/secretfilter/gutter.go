package secretfilter

import "bytes"

// catN returns the view of parent with a gutter removed from each line that has one (gutter: a
// line number and its separator, as cat -n, nl, grep -n and Claude Code's Read tool print, which
// puts "N\t" before each line of a file). Nil unless two lines
// or more, and at least half of them, have it. Without this view a dump or a wrapped value
// read by such a tool hides behind its gutter: each line of xxd then starts with a number, not
// an offset, and a wrapped value continues after one (issue 21; found with Claude Code 2.1.332's
// Read in e2e TestClaudeCodeStack/planted-formats). A line of the file that itself starts so
// loses its first column, which can only cost a match of that view; the text's own view is read
// as well.
//
// With space, a space after each gutter goes too (xxd's offsets then start their lines again,
// after "   3| "); without it, it stays (od -c's columns keep their places). The two
// views differ only where a gutter is followed by a space (spaceAfter).
func catN(parent *view, space bool) *view {
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
		if space && k > i && k <= j && text[k] == ' ' {
			k++
		}
		b.lit(text[k:j+1], k)
		i = j + 1
	}
	return b.done()
}

// spaceAfter reports whether a line of text has a gutter followed by a space.
func spaceAfter(text []byte) bool {
	for i := 0; i < len(text); {
		j := indexByteFrom(text, i, '\n')
		if j < 0 {
			j = len(text)
		}
		if k := i + gutter(text[i:j]); k > i && k < j && text[k] == ' ' {
			return true
		}
		i = j + 1
	}
	return false
}

// arrow is "→" (U+2192) in UTF-8.
var arrow = []byte("\u2192")

// gutter returns the length of line's gutter, 0 if it has none: spaces, a line number of at
// most 9 digits, and a tab, "→", ':', '|' or two spaces (cat -n, nl, grep -n, Claude Code's
// Read, awk's "%4d| "). A space after the separator stays: a dump's columns (od -c) keep their
// places, and a joined line's leading blanks are dropped by the join. A diff's '+' and a
// quote's '>' are no gutter: without them a variable-length token would be joined to the next
// line's first word (TestJoin, "not glued to a diff line"), so a value wrapped behind them is
// not joined (docs/secretfilter.md).
func gutter(line []byte) int {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	d := i
	for i < len(line) && '0' <= line[i] && line[i] <= '9' {
		i++
	}
	if i == d || i-d > 9 || i == len(line) {
		return 0
	}
	switch {
	case line[i] == '\t' || line[i] == ':' || line[i] == '|':
		return i + 1
	case bytes.HasPrefix(line[i:], arrow):
		return i + len(arrow)
	case bytes.HasPrefix(line[i:], []byte("  ")):
		return i + 2
	}
	return 0
}
