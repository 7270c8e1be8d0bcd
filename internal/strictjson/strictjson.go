// Package strictjson checks JSON the way a security boundary must read it before encoding/json
// v1 does: v1 silently takes the last of two duplicate keys, matches keys case-insensitively
// ({"model":"a","MODEL":"b"} decodes as "b"), replaces invalid UTF-8, and accepts trailing
// values. Two readers of one body (a proxy and the API behind it) can then disagree about what
// it says. Check refuses every such body, so the reader after it sees one meaning only.
//
// What it does not guarantee: anything about the values themselves; Decode only adds v1's
// DisallowUnknownFields on top.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check refuses data unless it is exactly one valid JSON value (RFC 8259), in valid UTF-8,
// nested at most maxDepth deep, in which no object repeats a key, either exactly or in a
// spelling that encoding/json v1 would fold to the same field.
//
// It is one pass over the bytes: a Messages request of several hundred KiB is checked on every
// call, and json.Decoder's token API spent most of llm's time there.
func Check(data []byte, maxDepth int) error {
	if !utf8.Valid(data) {
		return errors.New("json: invalid UTF-8")
	}
	c := checker{b: data, max: maxDepth}
	i := c.space(0)
	if i == len(data) {
		return errors.New("json: empty")
	}
	i, err := c.value(i, 0)
	if err != nil {
		return err
	}
	if i = c.space(i); i != len(data) {
		return fmt.Errorf("json: data after the value at offset %d", i)
	}
	return nil
}

type checker struct {
	b   []byte
	max int
}

func (c *checker) fail(i int, what string) error {
	if i >= len(c.b) {
		return errors.New("json: unexpected end of data")
	}
	return fmt.Errorf("json: %s at offset %d", what, i)
}

func (c *checker) space(i int) int {
	for i < len(c.b) && (c.b[i] == ' ' || c.b[i] == '\t' || c.b[i] == '\n' || c.b[i] == '\r') {
		i++
	}
	return i
}

// value checks the value at b[i] and returns the offset after it.
func (c *checker) value(i, depth int) (int, error) {
	if i >= len(c.b) {
		return i, c.fail(i, "")
	}
	switch ch := c.b[i]; {
	case ch == '{' || ch == '[':
		if depth >= c.max {
			return i, fmt.Errorf("json: nested deeper than %d", c.max)
		}
		if ch == '{' {
			return c.object(i+1, depth+1)
		}
		return c.array(i+1, depth+1)
	case ch == '"':
		end, _, err := c.str(i, false)
		return end, err
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number(i)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(c.b[i:], []byte(lit)) {
			return i + len(lit), nil
		}
	}
	return i, c.fail(i, fmt.Sprintf("invalid character %q", c.b[i]))
}

func (c *checker) object(i, depth int) (int, error) {
	var keys map[string]string // folded key → key as written; made on the second key
	var first, firstFolded string
	n := 0
	if i = c.space(i); i < len(c.b) && c.b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(c.b) || c.b[i] != '"' {
			return i, c.fail(i, "expected a key")
		}
		end, k, err := c.str(i, true)
		if err != nil {
			return i, err
		}
		f := fold(k)
		prev, dup := "", false
		switch n {
		case 0:
			first, firstFolded = k, f
		case 1:
			keys = map[string]string{firstFolded: first}
			fallthrough
		default:
			prev, dup = keys[f]
			keys[f] = k
		}
		if dup && prev == k {
			return i, fmt.Errorf("json: duplicate key %q", k)
		}
		if dup {
			return i, fmt.Errorf("json: keys %q and %q differ only in case", prev, k)
		}
		n++
		if i = c.space(end); i >= len(c.b) || c.b[i] != ':' {
			return i, c.fail(i, "expected ':'")
		}
		if i, err = c.value(c.space(i+1), depth); err != nil {
			return i, err
		}
		switch i = c.space(i); {
		case i < len(c.b) && c.b[i] == ',':
			i = c.space(i + 1)
		case i < len(c.b) && c.b[i] == '}':
			return i + 1, nil
		default:
			return i, c.fail(i, "expected ',' or '}'")
		}
	}
}

func (c *checker) array(i, depth int) (int, error) {
	if i = c.space(i); i < len(c.b) && c.b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth); err != nil {
			return i, err
		}
		switch i = c.space(i); {
		case i < len(c.b) && c.b[i] == ',':
			i = c.space(i + 1)
		case i < len(c.b) && c.b[i] == ']':
			return i + 1, nil
		default:
			return i, c.fail(i, "expected ',' or ']'")
		}
	}
}

// str checks the string literal at b[i] == '"' and returns the offset after it and, when
// decode is set, its value (keys only: they are short).
func (c *checker) str(i int, decode bool) (int, string, error) {
	start := i + 1
	for j := start; j < len(c.b); j++ {
		switch ch := c.b[j]; {
		case ch == '"':
			if !decode {
				return j + 1, "", nil
			}
			var v string
			if err := json.Unmarshal(c.b[i:j+1], &v); err != nil {
				return j, "", c.fail(i, "invalid string")
			}
			return j + 1, v, nil
		case ch < 0x20:
			return j, "", c.fail(j, "control character in a string")
		case ch == '\\':
			j++
			if j >= len(c.b) {
				return j, "", c.fail(j, "")
			}
			switch c.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(c.b) {
					return j, "", c.fail(len(c.b), "")
				}
				for _, h := range c.b[j+1 : j+5] {
					if !isHex(h) {
						return j, "", c.fail(j, "invalid \\u escape")
					}
				}
				j += 4
			default:
				return j, "", c.fail(j, "invalid escape")
			}
		}
	}
	return len(c.b), "", c.fail(len(c.b), "")
}

func isHex(h byte) bool { return h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F' }

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at b[i].
func (c *checker) number(i int) (int, error) {
	digits := func(j int) int {
		for j < len(c.b) && c.b[j] >= '0' && c.b[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if c.b[j] == '-' {
		j++
	}
	switch {
	case j < len(c.b) && c.b[j] == '0':
		j++
	case j < len(c.b) && c.b[j] >= '1' && c.b[j] <= '9':
		j = digits(j)
	default:
		return j, c.fail(j, "invalid number")
	}
	if j < len(c.b) && c.b[j] == '.' {
		k := digits(j + 1)
		if k == j+1 {
			return k, c.fail(k, "invalid number")
		}
		j = k
	}
	if j < len(c.b) && (c.b[j] == 'e' || c.b[j] == 'E') {
		j++
		if j < len(c.b) && (c.b[j] == '+' || c.b[j] == '-') {
			j++
		}
		k := digits(j)
		if k == j {
			return k, c.fail(k, "invalid number")
		}
		j = k
	}
	return j, nil
}

// Decode checks data and then decodes it into v, refusing fields v does not have.
func Decode(data []byte, maxDepth int, v any) error {
	if err := Check(data, maxDepth); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// fold maps a key to one spelling per case-folding orbit, so K, k and the Kelvin sign (U+212A),
// which encoding/json v1 treats as the same letter, compare equal.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		lo := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			lo = min(lo, f)
		}
		return lo
	}, s)
}
