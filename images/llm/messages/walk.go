package messages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a fast reader of JSON that strictjson.Check has already accepted: encoding/json
// v1 reads large strings at about 100 MB/s and every Unmarshal reads its input twice, which made
// a 256 KiB tool_result cost llm 20 ms. It reads a body once into a tape, the span of every
// value in document order, finding the ends of strings with bytes.IndexByte; every later
// reading (Parse's fields, the messages, the strings the filter reads) walks the tape, so a
// string deep in a tool_result is not skipped again at each level above it (issue 21: that
// made the reading of a 256 KiB body cost more than the filter). It decodes only the strings the
// filter reads. Anything it does not expect is an error, and callers refuse the request: it
// never guesses.

var errJSON = errors.New("json: unexpected input")

type member struct {
	key string
	val []byte
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string literal starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for i++; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, errJSON
		}
		i += j
		n := 0 // backslashes before the quote: an odd count escapes it
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i, nil
		}
	}
}

// skipScalar returns the index after the number or literal starting at b[i].
func skipScalar(b []byte, i int) (int, error) {
	j := i
	for j < len(b) && bytes.IndexByte([]byte(",]} \t\r\n"), b[j]) < 0 {
		j++
	}
	if j == i || b[i] == '"' || b[i] == '{' || b[i] == '[' {
		return 0, errJSON
	}
	return j, nil
}

// tape is a JSON text read once: the span of each of its values in document order, each
// container's members or elements after it.
type tape struct {
	b []byte
	n []node
}

// node is one value: b[s:e], after an object member's key literal b[ks:ke] (ks < 0 for the
// top value and array elements); next is the index of the node after the value and everything
// in it.
type node struct{ s, e, ks, ke, next int32 }

// read returns the tape of b, one JSON value with white space around it.
func read(b []byte) (*tape, error) {
	if len(b) > math.MaxInt32 {
		return nil, errJSON
	}
	t := &tape{b: b}
	j, err := t.value(skipSpace(b, 0), -1, -1, 0)
	if err != nil {
		return nil, err
	}
	if skipSpace(b, j) != len(b) {
		return nil, errJSON
	}
	return t, nil
}

// value appends the node of the value at b[i] (key literal b[ks:ke]) and those in it, and
// returns the index after it. Depth is bounded here too, so that no input recurses without end.
func (t *tape) value(i, ks, ke, depth int) (int, error) {
	b := t.b
	if i >= len(b) || depth > MaxDepth {
		return 0, errJSON
	}
	k := len(t.n)
	t.n = append(t.n, node{s: int32(i), ks: int32(ks), ke: int32(ke)})
	var j int
	var err error
	switch b[i] {
	case '"':
		j, err = skipString(b, i)
	case '{', '[':
		j, err = t.container(i, depth)
	default:
		j, err = skipScalar(b, i)
	}
	if err != nil {
		return 0, err
	}
	t.n[k].e, t.n[k].next = int32(j), int32(len(t.n))
	return j, nil
}

// container reads the members or elements of the object or array at b[i].
func (t *tape) container(i, depth int) (int, error) {
	b := t.b
	open, close := b[i], byte(']')
	if open == '{' {
		close = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == close {
		return i + 1, nil
	}
	for {
		ks, ke := -1, -1
		if open == '{' {
			if i >= len(b) || b[i] != '"' {
				return 0, errJSON
			}
			j, err := skipString(b, i)
			if err != nil {
				return 0, err
			}
			ks, ke, i = i, j, skipSpace(b, j)
			if i >= len(b) || b[i] != ':' {
				return 0, errJSON
			}
			i = skipSpace(b, i+1)
		}
		j, err := t.value(i, ks, ke, depth+1)
		if err != nil {
			return 0, err
		}
		switch i = skipSpace(b, j); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == close:
			return i + 1, nil
		default:
			return 0, errJSON
		}
	}
}

// raw is node k's bytes.
func (t *tape) raw(k int32) []byte { return t.b[t.n[k].s:t.n[k].e] }

// kind is the first byte of node k: '{', '[', '"' or that of a number or literal.
func (t *tape) kind(k int32) byte { return t.b[t.n[k].s] }

// key is the decoded key of member node k.
func (t *tape) key(k int32) ([]byte, error) {
	if t.n[k].ks < 0 {
		return nil, errJSON
	}
	return unquote(t.b[t.n[k].ks:t.n[k].ke])
}

// each calls fn with every member or element of container node k, in document order.
func (t *tape) each(k int32, fn func(c int32) error) error {
	for c := k + 1; c < t.n[k].next; c = t.n[c].next {
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// members returns the members of object node k in document order.
func (t *tape) members(k int32) ([]member, error) {
	if t.kind(k) != '{' {
		return nil, errJSON
	}
	var ms []member
	err := t.each(k, func(c int32) error {
		key, err := t.key(c)
		ms = append(ms, member{string(key), t.raw(c)})
		return err
	})
	return ms, err
}

// members returns an object's members in document order.
func members(raw []byte) ([]member, error) {
	t, err := read(raw)
	if err != nil {
		return nil, err
	}
	return t.members(0)
}

// unquote decodes a JSON string literal as encoding/json does (lone surrogates become U+FFFD).
// Without escapes it returns a slice of lit, not a copy.
func unquote(lit []byte) ([]byte, error) { return unquoteTo(nil, lit) }

// unquoteTo is unquote that decodes into *buf, which it makes or grows as needed (the walk over
// a body decodes every string into one buffer, reused: each is scanned and dropped before the
// next); nil buf is a new buffer each time. A result with escapes decoded is only good until
// *buf is written again.
func unquoteTo(buf *[]byte, lit []byte) ([]byte, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, errJSON
	}
	s := lit[1 : len(lit)-1]
	k := bytes.IndexByte(s, '\\')
	if k < 0 {
		return s, nil
	}
	// No escape decodes longer than it is written (\uXXXX to 3 bytes at most, a surrogate pair
	// of 12 to 4), so the output, written at n <= i, fits in len(s).
	var out []byte
	switch {
	case buf != nil && cap(*buf) >= len(s):
		out = (*buf)[:len(s)]
	case buf != nil:
		out = make([]byte, len(s))
		*buf = out[:0]
	default:
		out = make([]byte, len(s))
	}
	n := copy(out, s[:k])
	for i := k; i < len(s); {
		if s[i] != '\\' {
			// The plain bytes up to the next escape, eight at a time: tool output has an escape
			// every few dozen bytes, too often for bytes.IndexByte's start-up cost.
			// The lowest bit of m marks the first '\\' (0x5c) exactly; bits above it may be
			// false. The eight bytes are stored whole: those after n are written again later.
			for i+8 <= len(s) {
				w := binary.LittleEndian.Uint64(s[i:])
				binary.LittleEndian.PutUint64(out[n:], w)
				x := w ^ 0x5c5c5c5c5c5c5c5c
				if m := (x - 0x0101010101010101) &^ x & 0x8080808080808080; m != 0 {
					p := bits.TrailingZeros64(m) / 8
					i, n = i+p, n+p
					break
				}
				i, n = i+8, n+8
			}
			for i < len(s) && s[i] != '\\' {
				out[n] = s[i]
				i, n = i+1, n+1
			}
			continue
		}
		if i+1 >= len(s) {
			return nil, errJSON
		}
		c := s[i+1]
		switch c {
		case '"', '\\', '/':
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				return nil, errJSON
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(s, i+2); ok && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						n += utf8.EncodeRune(out[n:], d)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			n += utf8.EncodeRune(out[n:], r)
			continue
		default:
			return nil, errJSON
		}
		out[n] = c
		i, n = i+2, n+1
	}
	return out[:n], nil
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s[i:i+4]), 16, 16)
	return rune(v), err == nil
}

// walkStrings calls fn on every string value in raw (not keys). With skip, the strings that
// Secrets leaves alone are skipped: fields in skipKeys, and the data of a base64 source.
func walkStrings(raw []byte, skip bool, fn func([]byte)) error {
	t, err := read(raw)
	if err != nil {
		return err
	}
	return t.strings(0, skip, nil, fn)
}

// strings is walkStrings of node k. Strings with escapes are decoded into *buf (grown as
// needed; nil for a new one each time): each is good only until fn returns.
func (t *tape) strings(k int32, skip bool, buf *[]byte, fn func([]byte)) error {
	switch t.kind(k) {
	case '"':
		s, err := unquoteTo(buf, t.raw(k))
		fn(s)
		return err
	case '[':
		return t.each(k, func(c int32) error { return t.strings(c, skip, buf, fn) })
	case '{':
		binary := false
		err := t.each(k, func(c int32) error {
			key, err := t.key(c)
			if string(key) == "type" && bytes.Equal(t.raw(c), []byte(`"base64"`)) {
				binary = true
			}
			return err
		})
		if err != nil {
			return err
		}
		return t.each(k, func(c int32) error {
			key, _ := t.key(c) // read above
			if skip && (skipKeys[string(key)] || binary && string(key) == "data") {
				return nil
			}
			return t.strings(c, skip, buf, fn)
		})
	}
	return nil
}
