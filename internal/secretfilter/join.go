package secretfilter

import (
	"bytes"
	"strings"
)

// Joining lines: a value that a line break or a fixed-width wrap split (fold -w 20, a key
// pasted over two lines, base64 -w 40) is read whole where a rule needs it (issue 21). Where
// the rule's candidate at a keyword ends at a line end, or finds nothing before one, the rule
// runs again with that line break removed, and the next, for as long as the match keeps ending
// at a line end. The keyword automaton reads through line breaks too (keywords.go), so that a
// wrap inside a keyword ("sk-a" / "nt-api03-…") does not hide it.
//
// A match that already exists is only extended when what it takes of the next line is the rest
// of the value (continues): a key at a line end followed by "export PATH=…" is not a wrapped
// key, and is not glued to "export".

const (
	maxJoins = 128 // line breaks one match is joined over: a 4096-bit RSA key folded at 20 columns needs about 50, one per line of its body
	maxBlind = 8   // line breaks joined while nothing matches yet: fold -w 10 of a 108-character key needs 6
)

// joinedText is text[at:] with the line breaks cuts removed (sorted intervals of text).
type joinedText struct {
	text []byte
	at   int
	cuts []ival
}

// prefix returns the first n bytes of the joined text, fewer at its end.
func (j *joinedText) prefix(n int) []byte {
	out := make([]byte, 0, min(n, len(j.text)-j.at))
	p := j.at
	for _, c := range j.cuts {
		if len(out) >= n {
			break
		}
		take := min(c.a-p, n-len(out))
		out = append(out, j.text[p:p+take]...)
		p = c.b
	}
	if len(out) < n {
		out = append(out, j.text[p:min(len(j.text), p+n-len(out))]...)
	}
	return out
}

// pos maps offset k of the joined text to text.
func (j *joinedText) pos(k int) int {
	p := j.at + k
	for _, c := range j.cuts {
		if p < c.a {
			break
		}
		p += c.b - c.a
	}
	return p
}

// spans returns the intervals of text that the joined text's [a, b) came from, split at cuts.
func (j *joinedText) spans(a, b int) []ival {
	s, last := j.pos(a), j.pos(b-1)
	var out []ival
	for _, c := range j.cuts {
		if c.a > s && c.a <= last {
			out = append(out, ival{s, c.a})
			s = c.b
		}
	}
	return append(out, ival{s, last + 1})
}

// breakAt returns p if a line break ("\n" or "\r\n") starts at text[p], -1 if not.
func breakAt(text []byte, p int) int {
	if p < len(text) && (text[p] == '\n' || text[p] == '\r' && p+1 < len(text) && text[p+1] == '\n') {
		return p
	}
	return -1
}

// breakEnd returns the end of the line break that starts at text[p], -1 if none does.
func breakEnd(text []byte, p int) int {
	switch {
	case p < len(text) && text[p] == '\n':
		return p + 1
	case p+1 < len(text) && text[p] == '\r' && text[p+1] == '\n':
		return p + 2
	}
	return -1
}

// breakBefore returns the start of the line break that ends at text[p], -1 if none does.
func breakBefore(text []byte, p int) int {
	if p == 0 || text[p-1] != '\n' {
		return -1
	}
	if p >= 2 && text[p-2] == '\r' {
		return p - 2
	}
	return p - 1
}

// joinable returns the line break at p, if it ends a line that is not empty and the next line
// starts with a character that is not white space: a wrap, not a paragraph or an indented
// continuation (which the rules' own \s reads).
func joinable(text []byte, p int) (ival, bool) {
	q := breakEnd(text, p)
	if q < 0 || p == 0 || text[p-1] == '\n' || q >= len(text) || isSpace(text[q]) {
		return ival{}, false
	}
	return ival{p, q}, true
}

// blindBreak returns the first line break at or after from and within twice r's window of at,
// where a candidate that matched nothing may continue: inside a value or a name, between two
// characters of a token (a rule's own \s reads a break between words); -1 if none. For a rule
// whose match holds no white space, white space before the break ends the candidate first.
func (r *rule) blindBreak(text []byte, at, from int) int {
	end := min(len(text), at+2*r.after)
	if from >= end {
		return -1
	}
	k := bytes.IndexByte(text[from:end], '\n') // vectorised: most candidates have none near
	if k < 0 {
		return -1
	}
	nl := from + k
	p := nl
	if p > from && text[p-1] == '\r' {
		p--
	}
	if p == 0 || !tokenChar[text[p-1]] || nl+1 >= len(text) || !tokenChar[text[nl+1]] {
		return -1
	}
	if !r.spaced {
		for _, c := range text[from:p] {
			if isSpace(c) {
				return -1
			}
		}
	}
	return p
}

// tokenChar holds the characters of credentials and their names: letters, digits and
// "+/=_.~-".
var tokenChar = func() (m [256]bool) {
	for c := range m {
		m[c] = isAlnum(byte(c)) || strings.IndexByte("+/=_.~-", byte(c)) >= 0
	}
	return m
}()

// lineRestBlank reports whether text[p:] up to the line's end holds no letter or digit.
func lineRestBlank(text []byte, p int) bool {
	for ; p < len(text) && text[p] != '\n'; p++ {
		if c := text[p] | 0x20; 'a' <= c && c <= 'z' || '0' <= text[p] && text[p] <= '9' {
			return false
		}
	}
	return true
}

// lineLen returns the length of the line that ends at text[end] (a line break or the text's
// end), and where it starts.
func lineLen(text []byte, end int) (int, int) {
	start := bytes.LastIndexByte(text[:end], '\n') + 1
	n := end - start
	if n > 0 && text[end-1] == '\r' {
		n--
	}
	return n, start
}

// fullWidth reports whether the line that cut ends is as long as the line before it or the
// line after it, at least 8 bytes: the mark of a fixed-width wrap (fold -w, base64 -w), where a
// line ends wherever the width says, not where a value does.
func fullWidth(text []byte, cut ival) bool {
	n, start := lineLen(text, cut.a)
	if n < 8 {
		return false
	}
	if start > 0 {
		if prev, _ := lineLen(text, start-1); prev == n {
			return true
		}
	}
	next := len(text)
	if k := bytes.IndexByte(text[cut.b:], '\n'); k >= 0 {
		next = cut.b + k
	}
	m, _ := lineLen(text, next)
	return m == n
}

// continues reports whether text[cut.b:end], the part of an extended match on the line after
// cut, is the rest of the value and not the next line's own text: the line cut ends is a
// fixed-width wrap; or the part is not a mark and a plain word ("+Accept", "- item") and
// either takes its line to the end (bar punctuation) or looks like key material (it mixes
// digits and letters, or lower and upper case other than as a capitalised word). A key at a line end followed by "gh repo list" or
// "export PATH=…" is not a wrapped key, and is not glued to "gh" or "export"; the price is that
// a value split once over two lines, whose first part alone matches and whose second part is
// short, plain and followed by more text on its line, keeps that part unredacted.
func continues(text []byte, cut ival, end int) bool {
	part := text[cut.b:end]
	switch {
	case fullWidth(text, cut):
		return true
	case !isAlnum(part[0]) && plainWord(part[1:]): // a diff's "+Accept", a list's "-item": the line's own mark and word
		return false
	case lineRestBlank(text, end):
		return true
	}
	var digit, upper, lower, capitalised bool
	capitalised = 'A' <= part[0] && part[0] <= 'Z'
	for i, c := range part {
		digit = digit || '0' <= c && c <= '9'
		upper = upper || 'A' <= c && c <= 'Z'
		lower = lower || 'a' <= c && c <= 'z'
		capitalised = capitalised && (i == 0 || 'a' <= c && c <= 'z')
	}
	return digit && (upper || lower) || upper && lower && !capitalised
}

// plainWord reports whether b is letters only, in one case or capitalised.
func plainWord(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	upper, lower := 0, 0
	for _, c := range b {
		switch {
		case 'A' <= c && c <= 'Z':
			upper++
		case 'a' <= c && c <= 'z':
			lower++
		default:
			return false
		}
	}
	return upper == 0 || lower == 0 || upper == 1 && 'A' <= b[0] && b[0] <= 'Z'
}

func isAlnum(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z' }

// join runs r at the keyword occurrence at again over the text with line breaks removed, where
// the match m found (nil if none) ends at a line end, or where nothing matched and the candidate
// runs into one. It returns the intervals of text that carry the secret it found (nil if it
// found none better than m), where that match ends, and spent plus the bytes it read.
func (r *rule) join(text []byte, at int, m []int, spent int) ([]ival, int, int) {
	next, secretEnd := -1, -1 // the line break to join next; where in text the last secret ends
	switch {
	case m == nil:
		next = r.blindBreak(text, at, at)
	case m[2*r.group] >= 0 && !bytes.HasSuffix(text[at+m[0]:at+m[1]], []byte("-----")):
		// (A match that ends with an armour line, a PEM key's END, is whole.)
		secretEnd = at + m[2*r.group+1]
		next = breakAt(text, secretEnd)
	}
	j := &joinedText{text: text, at: at}
	var best []ival
	bestEnd, blind := 0, 0
	for len(j.cuts) < maxJoins && next >= 0 {
		cut, ok := joinable(text, next)
		if !ok {
			break
		}
		j.cuts = append(j.cuts, cut)
		t, m2, sp := r.run(j.prefix, spent)
		spent = sp
		if m2 == nil || m2[2*r.group] < 0 || m2[2*r.group] == m2[2*r.group+1] {
			if blind++; secretEnd >= 0 || blind == maxBlind {
				break
			}
			next = r.blindBreak(text, at, cut.b)
			continue
		}
		s2, e2 := m2[2*r.group], m2[2*r.group+1]
		if r.cut != nil {
			e2 = s2 + r.cut(t[s2:e2])
		}
		end := j.pos(e2-1) + 1
		needed := j.cuts[0] // a first match must cross a join, or the text alone had it
		if secretEnd >= 0 {
			needed = cut // an extension must cross the newest one
		}
		if end <= needed.a || secretEnd >= 0 && !continues(text, cut, end) || !r.acceptable(t[m2[0]:m2[1]], t[s2:e2]) {
			break
		}
		best, bestEnd, secretEnd = j.spans(s2, e2), j.pos(m2[1]-1)+1, end
		next = breakAt(text, end)
	}
	return best, bestEnd, spent
}
