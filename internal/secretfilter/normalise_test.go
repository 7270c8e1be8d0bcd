package secretfilter

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// plantable are secrets FuzzForms plants, one per rule that finds a token standing alone; all
// fake.
var plantable = []struct{ rule, value string }{
	{"anthropic-api-key", "sk-ant-api03-Qm7vX2pL9kR4tW8zN1cB6yH3jF5dG0sA-eU_iO7qP2wE9rT4yU1iO8pA3sD6fG9hJ2kL5zX8cV1bN4mQ7wE0rTAA"},
	{"github-token", "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"},
	{"aws-access-key-id", "AKIAFQGEOZJACZNCCO7U"},
	{"slack-token", "xoxb-837402917364-5820174639281-Zq8Lm3Vn7Xc2Bw5Rt9Yk4Hs6"},
	{"stripe-key", "sk_live_51Hq8ZtLm3Vn7Xc2Bw5Rt9Yk4Hs6Jd1Pf0Ga"},
	{"npm-token", "npm_Zq8Lm3Vn7Xc2Bw5Rt9Yk4Hs6Jd1Pf0Ga8Uex"},
}

var plainWords = strings.Fields(`the of and build test run file line code output value name path
	error config server client request read write open close list item data text page table`)

// plantFile makes a small text file from seed with secret in it, after a key name and before a
// blank or a comment line (always a comment line if the file is to be folded), and returns it
// with the secret's offsets.
func plantFile(seed []byte, secret string, fold bool) ([]byte, int, int) {
	var b bytes.Buffer
	words := func(seed []byte) {
		for i, c := range seed {
			b.WriteString(plainWords[int(c)%len(plainWords)])
			if c%7 == 0 && i > 0 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
	}
	half := len(seed) / 2
	words(seed[:half])
	b.WriteString([]string{"token=", "key: ", "export API_KEY="}[len(seed)%3])
	s := b.Len()
	b.WriteString(secret)
	e := b.Len()
	after := []string{" ", "\n# "}[len(seed)%2]
	if fold {
		// A value wrapped once whose second part is followed by more text on its line reads
		// the same as a whole value followed by a line of text; join.go takes it for the
		// second, and the test of joins holds that case.
		after = "\n# "
	}
	b.WriteString(after)
	words(seed[half:])
	b.WriteByte('\n')
	return b.Bytes(), s, e
}

func formNames() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range forms {
			if !yield(k) {
				return
			}
		}
	})
}

// FuzzForms: a secret planted in a file of ordinary words, printed in any of the forms
// (forms_test.go) at any width, is found by its rule and by layer 1 holding it, and the hits
// cover exactly the bytes that carry it: each byte that carries only the secret, and no byte
// that carries none of it but the blanks between such bytes on one line.
func FuzzForms(f *testing.F) {
	names := formNames()
	for i := range names {
		for k := range plantable {
			f.Add([]byte("build the config\nread\x07 the file list"), uint8(k), uint8(i), uint8(12+k))
		}
	}
	base := newTestFilter(f)
	f.Fuzz(func(t *testing.T, seed []byte, which, form, width uint8) {
		if len(seed) > 64 {
			seed = seed[:64]
		}
		p := plantable[int(which)%len(plantable)]
		name := names[int(form)%len(names)]
		file, s, e := plantFile(seed, p.value, name == "fold-w")
		o := forms[name](file, 8+int(width)%72)
		may, must := o.carries(s, e)
		hits := base.Scan(o.out)
		if !slices.ContainsFunc(hits, func(h Hit) bool { return h.Rule == p.rule }) {
			t.Fatalf("%s of %q: no %s hit in %v:\n%s", name, file, p.rule, hits, o.out)
		}
		if err := coverErr(o, hits, may, must); err != "" {
			t.Fatalf("%s of %q, rule hits: %s\n%s", name, file, err, o.out)
		}
		l1 := layer1Only([]planted{{p.rule, p.value}})
		if err := coverErr(o, l1.Scan(o.out), may, must); err != "" {
			t.Fatalf("%s of %q, layer 1: %s\n%s", name, file, err, o.out)
		}
	})
}

// TestDumpsReadToolOutput: the dumps the real tools printed (the tool corpus) read back to the
// files they were made from, byte for byte (od -x and hexdump pad an odd length with a zero
// byte); and each decoded byte maps back to the digits or the od -c field that show it, and to
// its character in the text column where the dump has one.
func TestDumpsReadToolOutput(t *testing.T) {
	for _, format := range []string{"xxd", "xxd-p", "hexdump-C", "hexdump", "od-x", "od-An-tx1", "od-c", "od-An-c"} {
		files, _ := filepath.Glob(filepath.Join(toolsDir, "out", format, "*"))
		if len(files) == 0 {
			t.Fatalf("no captured %s output", format)
		}
		for _, p := range files {
			out, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join(toolsDir, "src", filepath.Base(p)))
			if err != nil {
				t.Fatal(err)
			}
			v := dumps(&view{dec: out})
			if v == nil {
				t.Errorf("%s/%s: not read as a dump", format, filepath.Base(p))
				continue
			}
			if bytes.Contains(out, []byte("\n*\n")) {
				continue // a repeated line folded into '*': its bytes are not in the dump
			}
			if got := bytes.TrimRight(v.dec, "\x00"); !bytes.Equal(got, src) && !bytes.Equal(v.dec, src) {
				t.Errorf("%s/%s: read back %q, want %q", format, filepath.Base(p), v.dec, src)
				continue
			}
			for i, c := range v.dec {
				ivs := v.toRoot([]ival{{i, i + 1}})
				shown := out[ivs[0].a:ivs[0].b]
				var back []byte
				if strings.HasPrefix(format, "od-") && strings.HasSuffix(format, "c") {
					back = unfield(shown)
				} else {
					back, _ = hex.DecodeString(string(shown))
				}
				if !bytes.Equal(back, []byte{c}) {
					t.Fatalf("%s/%s: byte %d (%q) maps to %q", format, filepath.Base(p), i, c, shown)
				}
				if len(ivs) == 2 && (ivs[1].b != ivs[1].a+1 || out[ivs[1].a] != printable(c)) {
					t.Fatalf("%s/%s: byte %d (%q) echoed as %q", format, filepath.Base(p), i, c, out[ivs[1].a:ivs[1].b])
				}
				if (format == "xxd" || format == "hexdump-C") != (len(ivs) == 2) {
					t.Fatalf("%s/%s: byte %d maps to %d places", format, filepath.Base(p), i, len(ivs))
				}
			}
		}
	}
}

// unfield decodes the non-blank part of an od -c field (a blank one is a space).
func unfield(f []byte) []byte {
	out, _ := odcLine(append(append(bytes.Repeat([]byte(" "), 4-len(f)), f...), "   x"...), nil)
	out = out[:len(out)-1]
	var b []byte
	for _, d := range out {
		b = append(b, d.c)
	}
	return b
}

// TestNotDumps: lines of ordinary text that a dump reader must not take for dumps.
func TestNotDumps(t *testing.T) {
	for _, line := range []string{
		"func main() {", "    return x", "dead beef is tasty", "\tif err != nil {",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  go.sum",
		"2024 10 11 12:30", "0000035", "   a b", "    ", "-- 1 2", "  |x|",
		"00000000: 7368 not hex", "0000000 6b73 zz2d",
	} {
		if _, k := hexLine([]byte(line), nil); k != notDump && k != hexBare {
			t.Errorf("hexLine(%q) = %v, want no dump", line, k)
		}
		if len(line) >= 4 {
			if _, k := odcLine([]byte(line), nil); k != notDump {
				t.Errorf("odcLine(%q) = %v, want no dump", line, k)
			}
		}
	}
	if v := dumps(&view{dec: []byte("commit 3f4e\n\n    aws: bump\nab cd\n")}); v != nil {
		t.Errorf("dumps of ordinary text = %q, want none", v.dec)
	}
}

// TestFoldUnicode: invisible code points go, look-alikes become ASCII, and each byte of the view
// maps to the character it came from; a hit over the view covers the invisible characters
// inside it too.
func TestFoldUnicode(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"zero-width", "gh\u200bp_\u200cab\u200dc\u2060d\ufeffe", "ghp_abcde"},
		{"soft hyphen and bidi", "sk\u00ad-ant\u200e-\u202eapi\u2066x", "sk-ant-apix"},
		{"full-width", "ＡＫＩＡ０１２", "AKIA012"},
		{"mathematical", "𝐬𝐤-𝚊𝚗𝚝", "sk-ant"},
		{"cyrillic and greek", "АКІА хохb Ορen", "AKIA xoxb Open"},
		{"combining marks", "g\u0301h\u0338p_", "ghp_"},
		{"variation selector", "a\ufe0fb", "ab"},
		{"other text stays", "naïve café — ok", "naïve café — ok"},
		{"invalid UTF-8 stays", "a\xffb\u200bc", "a\xffbc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := []byte(tc.text)
			v := foldUnicode(&view{dec: text})
			got := tc.text
			if v != nil {
				got = string(v.dec)
			}
			if got != tc.want {
				t.Fatalf("foldUnicode(%q) = %q, want %q", tc.text, got, tc.want)
			}
			if v == nil {
				return
			}
			for i := range v.dec {
				ivs := v.toRoot([]ival{{i, i + 1}})
				if len(ivs) != 1 {
					t.Fatalf("byte %d maps to %v", i, ivs)
				}
				if r, n := utf8.DecodeRune(text[ivs[0].a:]); r != utf8.RuneError && ivs[0].b-ivs[0].a != n {
					t.Fatalf("byte %d maps to %q, not one character", i, text[ivs[0].a:ivs[0].b])
				}
			}
			hits := hitsOf(text, "x", v.toRoot([]ival{{0, len(v.dec)}}), nil)
			if len(hits) != 1 || hits[0].Start != 0 || hits[0].End != len(text) {
				t.Errorf("a hit over the whole view = %v, want one over the text", hits)
			}
		})
	}
}

// TestCatA: cat -A output reads back to the file; lines without the '$' stay as they are.
func TestCatA(t *testing.T) {
	text := "KEY=^Iva$\nM-bM-^@M-^Kx^?^@$\nprompt\n$\n"
	v := catA(&view{dec: []byte(text)})
	if v == nil || string(v.dec) != "KEY=\tva\n\u200bx\x7f\x00\nprompt\n\n" {
		t.Fatalf("catA = %+v", v)
	}
	if v := catA(&view{dec: []byte("a line$\nanother line\nand one more\n")}); v != nil {
		t.Errorf("catA read text with one '$' line of three: %q", v.dec)
	}
}

// TestSqueezed: line breaks go with the blanks around them, blank lines too, and each byte of
// the view maps back to itself.
func TestSqueezed(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"ab\n  cd", "abcd"},
		{"a \n \n b", "ab"},
		{"x\r\n\ty\n", "xy"},
		{"\n\n", ""},
		{"no break here", ""},
	} {
		got := squeezed([]byte(tc.text))
		if string(got) != tc.want || (got == nil) != (tc.text == "no break here") {
			t.Errorf("squeezed(%q) = %q, want %q", tc.text, got, tc.want)
		}
		if got == nil {
			continue
		}
		v := squeeze(&view{dec: []byte(tc.text)})
		if v == nil {
			if tc.want != "" {
				t.Errorf("squeeze(%q) = nil", tc.text)
			}
			continue
		}
		for i := range v.dec {
			iv := v.toRoot([]ival{{i, i + 1}})[0]
			if tc.text[iv.a:iv.b] != string(v.dec[i]) {
				t.Errorf("squeeze(%q): byte %d maps to %q", tc.text, i, tc.text[iv.a:iv.b])
			}
		}
	}
}
