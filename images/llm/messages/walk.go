package messages

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a fast reader of JSON that strictjson.Check has already accepted: encoding/json
// v1 reads large strings at about 100 MB/s and every Unmarshal reads its input twice, which made
// a 256 KiB tool_result cost llm 20 ms. It finds value boundaries with bytes.IndexByte and
// decodes only the strings the filter reads. Anything it does not expect is an error, and
// callers refuse the request: it never guesses.

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

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errJSON
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errJSON
	}
	j := i
	for j < len(b) && bytes.IndexByte([]byte(",]} \t\r\n"), b[j]) < 0 {
		j++
	}
	if j == i {
		return 0, errJSON
	}
	return j, nil
}

// container calls fn for each member of the object or element of the array raw (fn gets a
// nil key for elements), in document order.
func container(raw []byte, open byte, fn func(key, val []byte) error) error {
	close := byte(']')
	if open == '{' {
		close = '}'
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != open {
		return errJSON
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == close {
		return nil
	}
	for {
		var key []byte
		if open == '{' {
			if i >= len(raw) || raw[i] != '"' {
				return errJSON
			}
			j, err := skipString(raw, i)
			if err != nil {
				return err
			}
			key, i = raw[i:j], skipSpace(raw, j)
			if i >= len(raw) || raw[i] != ':' {
				return errJSON
			}
			i = skipSpace(raw, i+1)
		}
		j, err := skipValue(raw, i)
		if err != nil {
			return err
		}
		if err := fn(key, raw[i:j]); err != nil {
			return err
		}
		i = skipSpace(raw, j)
		switch {
		case i < len(raw) && raw[i] == ',':
			i = skipSpace(raw, i+1)
		case i < len(raw) && raw[i] == close:
			return nil
		default:
			return errJSON
		}
	}
}

// members returns an object's members in document order.
func members(raw []byte) ([]member, error) {
	var ms []member
	err := container(raw, '{', func(k, v []byte) error {
		key, err := unquote(k)
		ms = append(ms, member{string(key), v})
		return err
	})
	return ms, err
}

// unquote decodes a JSON string literal as encoding/json does (lone surrogates become U+FFFD).
// Without escapes it returns a slice of lit, not a copy.
func unquote(lit []byte) ([]byte, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, errJSON
	}
	s := lit[1 : len(lit)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			// Copy the run up to the next escape at once: tool output is mostly plain text with
			// an escaped newline per line.
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(s) {
			return nil, errJSON
		}
		switch s[i+1] {
		case '"', '\\', '/':
			out = append(out, s[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				return nil, errJSON
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(s, i+2); ok && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						out = utf8.AppendRune(out, d)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, errJSON
		}
		i += 2
	}
	return out, nil
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
	i := skipSpace(raw, 0)
	if i >= len(raw) {
		return errJSON
	}
	switch raw[i] {
	case '"':
		s, err := unquote(bytes.TrimSpace(raw))
		fn(s)
		return err
	case '[':
		return container(raw, '[', func(_, v []byte) error { return walkStrings(v, skip, fn) })
	case '{':
		ms, err := members(raw)
		if err != nil {
			return err
		}
		binary := false
		for _, m := range ms {
			if m.key == "type" && bytes.Equal(m.val, []byte(`"base64"`)) {
				binary = true
			}
		}
		for _, m := range ms {
			if skip && (skipKeys[m.key] || binary && m.key == "data") {
				continue
			}
			if err := walkStrings(m.val, skip, fn); err != nil {
				return err
			}
		}
	}
	return nil
}
