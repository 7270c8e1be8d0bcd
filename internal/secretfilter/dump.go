package secretfilter

import (
	"bytes"
	"slices"
)

// Dumps: the layouts in which xxd, hexdump and od print a file (issue 21), read back into the
// file's bytes, each byte mapped to the digits or the od -c field that carried it and, where
// the dump has one, to its character in the text column.
//
//	xxd            00000000: 736b 2d61 6e74  sk-ant             (big-endian groups, -g any width)
//	xxd -p         736b2d616e74...                            (one token a line)
//	hexdump -C     00000000  73 6b 2d 61  6e 74  |sk-ant|
//	hexdump, od -x 0000000 6b73 612d 746e                     (little-endian words)
//	od -An -tx1     73 6b 2d 61 6e 74                         (any -tx width, with or without offsets)
//	od -c          0000000   s   k   -   a  \n 342            (4-character fields; -An too; hexdump -c)
//
// Words of od -x, hexdump and od -tx2/4/8 are read little-endian, as they print on the machines
// the harness runs on (amd64, arm64); xxd's groups big-endian, as it prints them everywhere. A
// '*' line (od and hexdump fold repeated lines into it) is skipped: the bytes it stands for are
// not printed, so a secret that spans one is not read whole.

// dumpByte is one decoded byte: from line[s:s+n], shown again at line[echo] if echo >= 0.
type dumpByte struct {
	c          byte
	s, n, echo int32 // 16 bytes a byte: an xxd -p line of a MB is half a million of them
}

type lineKind int

const (
	notDump lineKind = iota
	hexData          // a line of a hex dump, with an offset or a text column that say so
	hexBare          // one token of hex digits alone: xxd -p, or the final offset of a dump
	odChars          // a line of od -c
)

// dumps returns the view of parent's text made of every dump in it, decoded, blocks of lines
// apart separated by a line break; nil if the dumps hold fewer than MinSecretLen bytes.
func dumps(parent *view) *view {
	text := parent.dec
	var b *builder
	var buf []dumpByte
	total := 0
	prev := notDump // kind of the previous line
	for ls := 0; ls < len(text); {
		le, next := indexByteFrom(text, ls, '\n'), 0
		if le < 0 {
			le = len(text)
		}
		next = le + 1
		line := text[ls:le]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		kind := notDump
		switch {
		case len(line) == 1 && line[0] == '*' && prev != notDump:
			ls = next
			continue
		case len(line) == 0, len(line) < 4 && prev == notDump: // a dump's last line may be short
		case prev == notDump && !maybeDump(line):
		default:
			if buf, kind = hexLine(line, buf[:0]); kind == notDump {
				buf, kind = odcLine(line, buf[:0])
			}
		}
		if kind == hexBare && prev == hexData {
			kind = notDump // the offset that ends od's and hexdump's output
		}
		if kind != notDump {
			if b == nil {
				b = newBuilder(parent, len(text)/2)
			} else if prev == notDump || (prev == odChars) != (kind == odChars) {
				b.put([]byte{'\n'}, ls-1, 1, -1) // a new block: not the same stream of bytes
			}
			b.grow(len(buf))
			for _, d := range buf {
				echo := -1
				if d.echo >= 0 {
					echo = ls + int(d.echo)
				}
				b.put([]byte{d.c}, ls+int(d.s), int(d.n), echo)
			}
			total += len(buf)
		}
		prev = kind
		ls = next
	}
	if total < MinSecretLen {
		return nil
	}
	return b.done()
}

// maybeDump is a quick look at the start of a line that can begin a dump: an offset or a
// group of hex digits ("00000000:", "0000000 6b73", "736b2d61"), or a blank and then a byte of
// od -An -tx1 or a field of od -An -c. Most lines of text fail at their first bytes.
func maybeDump(line []byte) bool {
	if line[0] != ' ' {
		k := 0
		for k < len(line) && hexVal(line[k]) >= 0 {
			k++
		}
		return k >= 2 && (k == len(line) || line[k] == ' ' || line[k] == ':')
	}
	f := line[1:4]
	return hexVal(f[0]) >= 0 && hexVal(f[1]) >= 0 || f[0] == ' ' && f[1] == ' ' || f[0] == ' ' && f[1] == '\\' ||
		'0' <= f[0] && f[0] <= '3' && '0' <= f[1] && f[1] <= '7' && '0' <= f[2] && f[2] <= '7'
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func allHex(b []byte) bool {
	for _, c := range b {
		if hexVal(c) < 0 {
			return false
		}
	}
	return len(b) > 0
}

type token struct{ s, e, gap int } // line[s:e], after gap spaces

// hexLine appends the bytes of line as a line of a hex dump, and says what kind it is.
func hexLine(line []byte, out []dumpByte) ([]dumpByte, lineKind) {
	if c := line[0]; c != ' ' && hexVal(c) < 0 {
		return out, notDump
	}
	var buf [24]token // the tokens of any usual line: xxd's, hexdump -C's, od's
	toks := buf[:0]
	for i := 0; i < len(line); {
		gap := 0
		for i < len(line) && line[i] == ' ' {
			i, gap = i+1, gap+1
		}
		s := i
		for i < len(line) && line[i] != ' ' {
			i++
		}
		if i == s {
			break
		}
		toks = append(toks, token{s, i, gap})
		if t := line[s:i]; !allHex(t) && !(len(toks) == 1 && t[len(t)-1] == ':') {
			break // not hex: the line ends here, or is no dump (checked below)
		}
	}
	if len(toks) == 0 {
		return out, notDump
	}
	t0 := line[toks[0].s:toks[0].e]
	data, col, little, kind := toks, -1, false, hexData
	switch {
	case t0[len(t0)-1] == ':': // xxd: offset, groups one space apart, two spaces, the text
		if toks[0].gap > 0 || !allHex(t0[:len(t0)-1]) {
			return out, notDump
		}
		data = toks[1:]
		for k, t := range data {
			if t.gap != 1 {
				data = data[:k]
				break
			}
		}
		col = -2 // the last bytes of the line, once their number is known
	case line[len(line)-1] == '|' && toks[0].gap == 0: // hexdump -C: offset, bytes, |text|
		k := bytes.Index(line, []byte("  |"))
		if k < 0 {
			return out, notDump
		}
		data, col = data[1:], k+3
		for n, t := range data {
			if t.s >= k {
				data = data[:n]
				break
			}
		}
	case toks[0].gap > 0: // od -An: no offset
		little = true
	case len(toks) == 1:
		kind = hexBare
	case toks[1].e-toks[1].s != len(t0): // od, hexdump: an offset of its own width
		data, little = toks[1:], true
	default:
		little = true
	}
	if len(data) == 0 {
		return out, notDump
	}
	width, nb := data[0].e-data[0].s, 0
	for k, t := range data {
		w := t.e - t.s
		if w%2 != 0 || w > width || w < width && k != len(data)-1 || !allHex(line[t.s:t.e]) {
			return out, notDump
		}
		nb += w / 2
	}
	switch {
	case col == -2:
		col = -1
		if e := len(line) - nb; e >= 2 && e > data[len(data)-1].e && line[e-1] == ' ' && line[e-2] == ' ' {
			col = e
		}
	case col >= 0 && (width != 2 || len(line)-1-col != nb):
		col = -1 // a column that does not match the bytes is not echoed
	}
	little = little && width > 2
	out = slices.Grow(out, nb) // a long xxd -p line holds half a MB: grow once, not by doubling
	at := 0
	for _, t := range data {
		w := t.e - t.s
		for k := 0; k < w/2; k++ {
			p := t.s + 2*k
			if little {
				p = t.e - 2 - 2*k
			}
			echo := -1
			if col >= 0 {
				echo = col + at
			}
			out = append(out, dumpByte{c: byte(hexVal(line[p])<<4 | hexVal(line[p+1])), s: int32(p), n: 2, echo: int32(echo)})
			at++
		}
	}
	return out, kind
}

// odEscapes are the characters od -c writes after a backslash, and the bytes they stand for.
const odEscapes, odBytes = "0abfnrtv", "\x00\a\b\f\n\r\t\v"

// odcLine appends the bytes of line as a line of od -c (or hexdump -c): an offset of digits
// or none, then 4-character fields: "   c" for a printable byte, "  \n" for an escape, " 302"
// for any other byte in octal.
func odcLine(line []byte, out []dumpByte) ([]dumpByte, lineKind) {
	off := 0
	for off < len(line) && hexVal(line[off]) >= 0 {
		off++
	}
	if off == 0 && line[0] != ' ' || off > 0 && (off < 6 || off > 16) {
		return out, notDump
	}
	rest := len(line) - off
	if rest < 4 || rest%4 != 0 {
		return out, notDump
	}
	blank := true
	for k := off; k < len(line); k += 4 {
		f := line[k : k+4]
		switch {
		case f[0] == ' ' && f[1] == ' ' && f[2] == ' ' && ' ' <= f[3] && f[3] < 0x7f:
			out = append(out, dumpByte{c: f[3], s: int32(k + 3), n: 1, echo: -1})
			blank = blank && f[3] == ' '
		case f[0] == ' ' && f[1] == ' ' && f[2] == '\\' && bytes.IndexByte([]byte(odEscapes), f[3]) >= 0:
			out = append(out, dumpByte{c: odBytes[bytes.IndexByte([]byte(odEscapes), f[3])], s: int32(k + 2), n: 2, echo: -1})
			blank = false
		case f[0] == ' ' && '0' <= f[1] && f[1] <= '3' && '0' <= f[2] && f[2] <= '7' && '0' <= f[3] && f[3] <= '7':
			out = append(out, dumpByte{c: (f[1]-'0')<<6 | (f[2]-'0')<<3 | (f[3] - '0'), s: int32(k + 1), n: 3, echo: -1})
			blank = false
		default:
			return out, notDump
		}
	}
	if blank {
		return out, notDump
	}
	return out, odChars
}
