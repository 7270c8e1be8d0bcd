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
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check refuses data unless it is exactly one valid JSON value, in valid UTF-8, nested at most
// maxDepth deep, in which no object repeats a key, either exactly or in a spelling that
// encoding/json v1 would fold to the same field.
func Check(data []byte, maxDepth int) error {
	if !utf8.Valid(data) {
		return errors.New("json: invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		keys   map[string]string // folded key → key as written
		object bool
		key    bool // the next token in this object is a key
	}
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF && len(stack) == 0 {
			break
		}
		if err == io.EOF {
			return errors.New("json: unexpected end of data")
		}
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top == nil {
			values++
			if values > 1 {
				return fmt.Errorf("json: data after the value at offset %d", dec.InputOffset())
			}
		}
		if k, isKey := tok.(string); isKey && top != nil && top.object && top.key {
			f := fold(k)
			if prev, dup := top.keys[f]; dup {
				if prev == k {
					return fmt.Errorf("json: duplicate key %q", k)
				}
				return fmt.Errorf("json: keys %q and %q differ only in case", prev, k)
			}
			top.keys[f] = k
			top.key = false
			continue
		}
		if top != nil && top.object && tok != json.Delim('}') {
			top.key = true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxDepth {
				return fmt.Errorf("json: nested deeper than %d", maxDepth)
			}
			o := tok == json.Delim('{')
			stack = append(stack, &frame{object: o, key: o, keys: map[string]string{}})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
		}
	}
	if values == 0 {
		return errors.New("json: empty")
	}
	return nil
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
