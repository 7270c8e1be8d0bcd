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
		"hex-mixed":  mixedCase(hex.EncodeToString(s)),
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

// mixedCase writes every other letter of s in upper case.
func mixedCase(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i += 2 {
		b[i] = bytes.ToUpper(b[i : i+1])[0]
	}
	return string(b)
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

// TestExactPartialEscapes: a secret with only some of its characters escaped, in one scheme or
// several, is found in a decoded view, and the hit covers the escapes it came from, whole.
func TestExactPartialEscapes(t *testing.T) {
	key, pw := string(testSecrets[0]), string(testSecrets[1])
	rep := func(s string, oldnew ...string) string { return strings.NewReplacer(oldnew...).Replace(s) }
	b64 := base64.StdEncoding.EncodeToString(testSecrets[1])
	for _, tc := range []struct {
		name, before, form, after string
		want                      bool
	}{
		// The e2e suite's string: a tool output holding the key with each '-' as \u002d.
		{"e2e json dashes", "$ cat .env\nANTHROPIC_API_KEY=", rep(key, "-", `\u002d`), "\n", true},
		{"json upper", "k=", rep(key, "-", `\u002D`), "", true},
		{"json letters", `"`, rep(key, "a", `\u0061`, "Z", `\u005a`), `"`, true},
		{"json short escapes", `{"p":"`, rep(pw, "/", `\/`, `"`, `\"`), `"}`, true},
		{"json surrogate pair", "", rep(pw, "💡", `\ud83d\udca1`, "é", `\u00e9`), "", true},
		{"backslash x", "echo $'", rep(key, "-", `\x2d`, "_", `\x5F`), "'", true},
		{"percent upper", "GET /?k=", rep(key, "-", "%2D"), " HTTP/1.1", true},
		{"percent lower", "", rep(key, "-", "%2d", "3", "%33"), "", true},
		{"percent spaces as plus", "q=", rep(pw, " ", "+", "&", "%26", "=", "%3D"), "", true},
		{"entity decimal", "<p>", rep(key, "-", "&#45;"), "</p>", true},
		{"entity hex", "<p>", rep(key, "-", "&#x2d;", "q", "&#X71;", "k", "&#x0006B;"), "</p>", true},
		{"entity named", "<p>", rep(pw, "&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;"), "</p>", true},
		{"mixed schemes", "", rep(key, "sk-", `sk\u002d`, "ant-", "ant%2D", "api03-", "api03&#45;"), "", true},
		{"base64 percent-encoded", "auth=", rep(b64, "+", "%2B", "/", "%2F", "=", "%3D"), "&x=1", true},
		{"hex mixed case", "0x", mixedCase(hex.EncodeToString(testSecrets[0])), "", true},
		{"hit ends inside an escape's bytes", "", rep(string(testSecrets[3]), "!", `\u0021`), "", true},
		{"among other escapes", `line\n\t%20&amp;`, rep(key, "-", `\u002d`), `\n%zz&#;`, true},
		// Not covered: an escape's output is not read again, a lone surrogate is not decoded,
		// and a near miss stays one.
		{"double escaped", "", rep(key, "-", "%252D"), "", false},
		{"escaped backslash", "", rep(key, "-", `\\u002d`), "", false},
		{"lone surrogate", "", rep(pw, "💡", `\ud83d`), "", false},
		{"near miss", "", rep(key, "sk-ant-", `sk\u002dant\u002e`), "", false},
		{"escapes, no secret", "", `a\u002db%2Dc&#45;d\"e\\f&amp;g`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFilter(t)
			for i, s := range testSecrets {
				f.AddSecret(fmt.Sprint("s", i), s)
			}
			text := []byte(tc.before + tc.form + tc.after)
			out, hits := f.Redact(text)
			var want []Hit
			if tc.want {
				want = []Hit{{RuleHarnessSecret, len(tc.before), len(tc.before) + len(tc.form)}}
			}
			if fmt.Sprint(hits) != fmt.Sprint(want) {
				t.Errorf("hits = %v; want %v", hits, want)
			}
			if tc.want && string(out) != tc.before+"[REDACTED:harness-secret]"+tc.after {
				t.Errorf("Redact = %q", out)
			}
		})
	}
}

// TestExactOtherIntroducer: a secret holding another scheme's escape ("%41"), JSON-escaped in
// part, is found in the view of JSON escapes alone.
func TestExactOtherIntroducer(t *testing.T) {
	f := newTestFilter(t)
	f.AddSecret("s", []byte(`pa%41ss-w\x&#45;rd-&amp;1`))
	text := `x pa%41ss\u002dw\\x&#45;rd\u002d&amp;1 y`
	if hits := f.Scan([]byte(text)); fmt.Sprint(hits) != fmt.Sprint([]Hit{{RuleHarnessSecret, 2, len(text) - 2}}) {
		t.Errorf("hits = %v; want one over [2,%d)", hits, len(text)-2)
	}
}
