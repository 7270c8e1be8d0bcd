package secretfilter

import "bytes"

// ansi returns the view of parent with terminal control sequences removed: CSI sequences (ESC
// '[' parameters, intermediates, a final byte in 0x40–0x7e: colours, erase-line), OSC
// sequences (ESC ']' … BEL or ESC '\': hyperlinks, titles) and other two-byte escapes, and
// backspace overstrikes (a character, '\b', the character again: nroff's bold). Nil when the
// text holds neither ESC nor '\b'. Found by an attack on llm: `grep --color=always` puts
// "\x1b[01;31m\x1b[K" before a match and "\x1b[m\x1b[K" after it, and the final 'm' or 'K'
// then defeats a rule's word boundary; a colour inside a key split its characters (git diff
// --color-words). The escapes draw nothing, so a reader sees the key whole.
func ansi(parent *view) *view {
	text := parent.dec
	if bytes.IndexByte(text, 0x1b) < 0 && bytes.IndexByte(text, '\b') < 0 {
		return nil
	}
	b := newBuilder(parent, len(text))
	last := 0 // text[last:] is not in the view yet
	for i := 0; i < len(text); {
		n := 0
		switch c := text[i]; {
		case c == 0x1b:
			n = escapeLen(text[i:])
		case c == '\b' && i > last:
			// "X\bX" (or "_\bX"): the overstruck character before it goes, the one after stays.
			b.lit(text[last:i-1], last)
			last, n = i+1, 0
			i++
			continue
		}
		if n == 0 {
			i++
			continue
		}
		b.lit(text[last:i], last)
		i += n
		last = i
	}
	b.lit(text[last:], last)
	return b.done()
}

// escapeLen returns the length of the escape sequence at the start of t (t[0] is ESC): a CSI
// up to its final byte, an OSC up to BEL or ESC '\', or ESC, its intermediate bytes and one
// more; an unfinished one runs to the end of t.
func escapeLen(t []byte) int {
	if len(t) < 2 {
		return len(t)
	}
	switch t[1] {
	case '[':
		for k := 2; k < len(t); k++ {
			if 0x40 <= t[k] && t[k] <= 0x7e {
				return k + 1
			}
			if t[k] < 0x20 || t[k] > 0x7e { // neither a parameter, an intermediate nor a final byte
				return k
			}
		}
		return len(t)
	case ']':
		for k := 2; k < len(t); k++ {
			switch {
			case t[k] == 0x07:
				return k + 1
			case t[k] == 0x1b && k+1 < len(t) && t[k+1] == '\\':
				return k + 2
			}
		}
		return len(t)
	}
	k := 1 // ESC, intermediates (ESC ( B: a character set), one final byte
	for k < len(t) && 0x20 <= t[k] && t[k] <= 0x2f {
		k++
	}
	return min(k+1, len(t))
}
