package secretfilter

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// testSecrets cover an API key, a password with characters every escaping touches, non-ASCII
// and non-UTF-8 bytes, and the shortest accepted length.
var testSecrets = [][]byte{
	[]byte("sk-ant-api03-" + strings.Repeat("Zq3_x-Lm9P", 9) + "kAA"),
	[]byte(`p@ss/w+rd&<x>="q" é 💡`),
	{0x00, 0xff, 0xfe, 0x80, 0x7f, 0x10, 0x20, 0x25, 0x41},
	[]byte("8bytes!!"),
}

// spellings writes every encoding the package documents, independently of encodings().
func spellings(s []byte) map[string]string {
	m := map[string]string{
		"raw":        string(s),
		"hex":        hex.EncodeToString(s),
		"HEX":        strings.ToUpper(hex.EncodeToString(s)),
		"b64":        base64.StdEncoding.EncodeToString(s),
		"b64-raw":    base64.RawStdEncoding.EncodeToString(s),
		"b64url":     base64.URLEncoding.EncodeToString(s),
		"b64url-raw": base64.RawURLEncoding.EncodeToString(s),
		"query":      url.QueryEscape(string(s)),
		"path":       url.PathEscape(string(s)),
	}
	var up, low strings.Builder
	for _, c := range s {
		fmt.Fprintf(&up, "%%%02X", c)
		fmt.Fprintf(&low, "%%%02x", c)
	}
	m["pct"], m["PCT"] = low.String(), up.String()
	if utf8.Valid(s) {
		js, _ := json.Marshal(string(s))
		m["json"] = string(js[1 : len(js)-1])
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		e.Encode(string(s))
		m["json-nohtml"] = strings.TrimSpace(b.String())
		m["json-nohtml"] = m["json-nohtml"][1 : len(m["json-nohtml"])-1]
		var u, U strings.Builder
		for _, r := range string(s) {
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(&u, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				fmt.Fprintf(&U, `\u%04X\u%04X`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				continue
			}
			fmt.Fprintf(&u, `\u%04x`, r)
			fmt.Fprintf(&U, `\u%04X`, r)
		}
		m["json-u"], m["json-U"] = u.String(), U.String()
	}
	return m
}

func TestExactEncodings(t *testing.T) {
	f := newTestFilter(t)
	for i, s := range testSecrets {
		f.AddSecret(fmt.Sprint("s", i), s)
	}
	for i, s := range testSecrets {
		for enc, form := range spellings(s) {
			t.Run(fmt.Sprintf("%d/%s", i, enc), func(t *testing.T) {
				text := []byte("before " + form + " after")
				out, hits := f.Redact(text)
				if bytes.Contains(out, []byte(form)) {
					t.Errorf("Redact left the %s form in %q", enc, out)
				}
				if len(hits) != 1 || hits[0].Rule != RuleHarnessSecret || hits[0].Start != 7 || hits[0].End != 7+len(form) {
					t.Errorf("hits = %v; want one harness-secret hit at [7,%d)", hits, 7+len(form))
				}
			})
		}
	}
}

// TestExactEmbeddedBase64: a secret inside a longer text that is base64'd as a whole, at each
// byte alignment: every character whose bits all come from the secret lies within a hit.
func TestExactEmbeddedBase64(t *testing.T) {
	f := newTestFilter(t)
	for i, s := range testSecrets {
		f.AddSecret(fmt.Sprint("s", i), s)
	}
	for i, s := range testSecrets {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			for pre := range 6 {
				plain := append(append([]byte("{\"k\":\""[:pre]), s...), "\",\"n\":1}"...)
				text := []byte(enc.EncodeToString(plain))
				hits := f.Scan(text)
				first, last := (8*pre+5)/6, 8*(pre+len(s))/6
				for c := first; c < last; c++ {
					if !covered(hits, c) {
						t.Errorf("secret %d, %s, %d bytes before: character %d of [%d,%d) not in a hit %v", i, encName(enc), pre, c, first, last, hits)
						break
					}
				}
			}
		}
	}
}

func covered(hits []Hit, i int) bool {
	for _, h := range hits {
		if h.Start <= i && i < h.End {
			return true
		}
	}
	return false
}

func encName(e *base64.Encoding) string {
	switch e {
	case base64.StdEncoding:
		return "std"
	case base64.URLEncoding:
		return "url"
	}
	return "raw-std"
}

func TestAddSecretShort(t *testing.T) {
	f := newTestFilter(t)
	f.AddSecret("short", []byte("1234567"))
	if got := f.Secrets(); len(got) != 0 {
		t.Errorf("Secrets = %v after a 7-byte secret; want none", got)
	}
	if hits := f.Scan([]byte("pin 1234567 and MTIzNDU2Nw==")); len(hits) != 0 {
		t.Errorf("Scan = %v; want no hits for an ignored secret", hits)
	}
}

// TestExactSecretIsCopied: changing the caller's slice after AddSecret changes nothing.
func TestExactSecretIsCopied(t *testing.T) {
	f := newTestFilter(t)
	s := []byte("correct horse battery")
	f.AddSecret("s", s)
	copy(s, "XXXXXXX")
	if hits := f.Scan([]byte("the correct horse battery staple")); len(hits) != 1 {
		t.Errorf("Scan = %v; want the secret as it was added", hits)
	}
}
