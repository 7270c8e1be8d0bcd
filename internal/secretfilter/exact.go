package secretfilter

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"slices"
)

// MinSecretLen is the shortest secret AddSecret accepts. Shorter ones are ignored: their
// encodings would match ordinary text, and the matcher reads 8-byte windows.
const MinSecretLen = 8

// RuleHarnessSecret names every layer-1 hit, whichever secret it was: a hit does not tell the
// reader which of the harness's secrets it saw.
const RuleHarnessSecret = "harness-secret"

// encodings returns every spelling of s that layer 1 looks for in a text and in its decoded
// views (unescape.go), which cover percent, JSON and HTML escaping, whole or partial; hex is
// matched in any case. Some may coincide. Each is at least MinSecretLen bytes long when s is.
//
// For a secret at byte offset a (mod 3) inside a longer base64 text, the spelling is the
// characters whose six bits all come from the secret: from ceil(8a/6) to floor(8(a+len)/6) of
// the encoding of a zero bytes followed by the secret. The character at each end that mixes
// the secret's bits with its neighbours' cannot be known in advance and is left out.
func encodings(s []byte) [][]byte {
	// With spaces as '+', a percent view of url.QueryEscape's output is the secret.
	forms := [][]byte{s, []byte(hex.EncodeToString(s)), bytes.ReplaceAll(s, []byte(" "), []byte("+"))}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		raw := enc.WithPadding(base64.NoPadding)
		forms = append(forms, []byte(enc.EncodeToString(s)), []byte(raw.EncodeToString(s)))
		for a := range 3 {
			e := raw.EncodeToString(append(make([]byte, a), s...))
			forms = append(forms, []byte(e[(8*a+5)/6:8*(a+len(s))/6]))
		}
	}
	return forms
}

func containsBytes(list [][]byte, b []byte) bool {
	return slices.ContainsFunc(list, func(x []byte) bool { return bytes.Equal(x, b) })
}

// exactSet finds every encoded form of every secret the harness holds. It is immutable: AddSecret
// builds a new one, so Scan needs no lock.
//
// The search reads one 8-byte window every stride bytes, stride = min(8, shortest form - 7),
// folds its case (foldCase) and looks it up in a 64-bit-per-word bloom filter, then in an index
// of the windows found at offsets 0..stride-1 of every form. Each occurrence of a form contains
// exactly one window at a multiple of stride at one of those offsets, so it is found once, at a
// cost of about one load and one multiply per stride bytes of text (bench_test.go compares it
// with one bytes.Index pass per form).
type exactSet struct {
	names          []string
	secrets, forms [][]byte
	anyCase        []bool    // per form: lower-case hex, matched in any case
	chars          [256]bool // every byte of every form, in both cases for letters
	minLen         int       // the shortest form's length
	blank          bool      // a form holds a byte squeezed removes (' ', '\t', '\r', '\n')
	stride         int
	shift          uint
	bloom          []uint64
	index          map[uint64][]formAt
}

type formAt struct{ form, off int32 }

func newExactSet(names []string, secrets [][]byte) *exactSet {
	x := &exactSet{names: names, secrets: secrets, stride: 8, index: map[uint64][]formAt{}}
	for _, s := range secrets {
		for _, f := range encodings(s) {
			if !containsBytes(x.forms, f) {
				x.forms = append(x.forms, f)
				x.anyCase = append(x.anyCase, len(bytes.Trim(f, "0123456789abcdef")) == 0)
				x.stride = min(x.stride, len(f)-7)
				if x.minLen == 0 || len(f) < x.minLen {
					x.minLen = len(f)
				}
				for _, c := range f {
					x.chars[c], x.chars[fold(c)], x.chars[upper(c)] = true, true, true
					x.blank = x.blank || c == ' ' || c == '\t' || c == '\r' || c == '\n'
				}
			}
		}
	}
	n := max(12, bits.Len(uint(32*x.stride*len(x.forms)))) // about 32 bits per indexed window
	x.shift, x.bloom = uint(64-n), make([]uint64, 1<<n/64)
	for i, f := range x.forms {
		for off := range x.stride {
			w := binary.LittleEndian.Uint64(f[off:]) | foldCase
			x.index[w] = append(x.index[w], formAt{int32(i), int32(off)})
			h := x.hash(w)
			x.bloom[h>>6] |= 1 << (h & 63)
		}
	}
	return x
}

func (x *exactSet) hash(w uint64) uint64 { return (w * 0x9e3779b97f4a7c15) >> x.shift }

// foldCase, ORed into a window, lowers the case of its ASCII letters. It also merges a few other
// pairs of bytes ('@' and '`', '-' and CR), which the comparison after the lookup tells apart.
const foldCase = 0x2020202020202020

// find appends the hits of every form in text and in each decoded view of it, a view's hits
// mapped back to the bytes of text they came from.
func (x *exactSet) find(text []byte, hits []Hit) []Hit {
	if len(x.forms) == 0 {
		return hits
	}
	hits = x.match(text, hits)
	eachView(text, func(v *view) {
		for _, h := range x.match(v.dec, nil) {
			// An escape view is contiguous in text: a hit is one interval, covering each escape
			// it touches whole.
			ivs := v.toParent(h.Start, h.End, nil)
			hits = append(hits, Hit{Rule: h.Rule, Start: ivs[0].a, End: ivs[len(ivs)-1].b})
		}
	})
	return hits
}

// match appends the hits of every form in text: byte for byte, or in any case for hex.
func (x *exactSet) match(text []byte, hits []Hit) []Hit {
	for i := 0; i+8 <= len(text); i += x.stride {
		w := binary.LittleEndian.Uint64(text[i:]) | foldCase
		if h := x.hash(w); x.bloom[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, at := range x.index[w] {
			f := x.forms[at.form]
			start := i - int(at.off)
			if start < 0 || start+len(f) > len(text) {
				continue
			}
			if t := text[start : start+len(f)]; bytes.Equal(t, f) || x.anyCase[at.form] && bytes.EqualFold(t, f) {
				hits = append(hits, Hit{Rule: RuleHarnessSecret, Start: start, End: start + len(f)})
			}
		}
	}
	return hits
}

// spansBreak reports whether an occurrence of a form in squeezed(text) could cross one of the
// line breaks squeezed removes. Only those are new: any other occurrence there is one in text
// itself, which match finds with the same hit, so when spansBreak is false layer 1 need not
// read the squeezed text (for most text, lines of ordinary words, it is false).
//
// An occurrence is made of form bytes (chars), so one that crosses a break lies in a run of
// form bytes of squeezed(text), at least minLen long, that holds a break. At each break the run
// is measured on both sides: to the left back over earlier breaks (left is the length of the
// run that ends at this break), to the right up to the next break; the last break a run holds
// sees it whole. False only when no run reaches minLen.
func (x *exactSet) spansBreak(text []byte) bool {
	if x.blank {
		return true // the runs would go on inside the breaks
	}
	last, left := 0, 0 // text[last:] is after the previous break; left is the run ending there
	for i := 0; ; {
		k := bytes.IndexByte(text[i:], '\n')
		if k < 0 {
			return false
		}
		s, e := breakSpan(text, last, i+k)
		a := s
		for a > last && x.chars[text[a-1]] {
			a--
		}
		if a == last && last > 0 {
			left += s - a // the run goes on over the previous break
		} else {
			left = s - a
		}
		b := e
		for b < len(text) && x.chars[text[b]] {
			b++
		}
		if left+b-e >= x.minLen {
			return true
		}
		i, last = e, e
	}
}

// squeezedFor is squeezed(text) where layer 1 could find something new in it (spansBreak),
// nil elsewhere.
func squeezedFor(x *exactSet, text []byte) []byte {
	if !x.spansBreak(text) {
		return nil
	}
	return squeezed(text)
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
