// Package secretfilter finds secrets in text that is about to leave a component (a message to
// the model, a command's output, a file write) and redacts them, for llm, bash and fs
// (docs/architecture.md, "The model path and custody"; docs/secretfilter.md).
//
// Two layers. Layer 1 matches exactly (hex in any case) every secret the harness itself holds,
// in the encodings AddSecret lists (raw, base64, hex), in the text and in views of it with its
// percent, backslash (JSON) and HTML escapes decoded, so that escaping all or some characters of
// a secret does not hide it. Layer 2 is a list of rules for well-known credential formats (Rules), each a
// regular expression that runs only where one of its keywords occurs, with an entropy floor
// where a format alone would match ordinary text; a policy adds its own rules (pbp.FilterRule).
// Layer 2 also reads every long run of base64 decoded once (Kubernetes secrets, Docker auths),
// over line breaks (base64 wrapped at any width). Hits never carry the matched bytes, only rule
// names and offsets in the text given, so they can be logged and audited. The agent writes the
// text, so the curated rules' cost is bounded by a constant times its length whatever it holds
// (a budget on keyword-anchored matching, then RE2's linear time); BenchmarkAdversarial measures
// the worst shapes known.
//
// Both layers read the text as tools print it, not only as it was written (issue 21): the
// normaliser (normalise.go, dump.go) makes views of the text with Unicode format characters
// removed and look-alike letters mapped to ASCII, cat -A read back, hex dumps (xxd, hexdump,
// od -x, od -t x) and od -c decoded, and escapes (\uXXXX, \xHH, %XX) decoded; a rule's candidate
// that ends at a line end continues on the next line (join.go), as fold -w and pasted keys
// wrap it; fixed-length ids need no word boundary after them (paste -sd "" glues them). Each
// view maps its bytes back to the text's, so a hit redacts exactly the bytes that carried the
// secret: a dump's digits and its text column, line by line.
//
// There is deliberately no in-text suppression marker (gitleaks' "gitleaks:allow"): the text
// comes from the agent, which is untrusted, and a marker would let it unfilter anything.
//
// What it does not guarantee: that text without hits holds no secret. It is a guard against
// accidents and careless exfiltration, not a wall. Layer 2 finds formats, not secrets, and
// layer 1 only the spellings and views it lists. No filter finds a secret the agent encrypts
// or transforms with a key (XOR, AES, a keyed hash), compresses, reverses, or splits across
// separate requests or tool calls, nor one re-encoded in a way nobody listed (base32, double
// percent-encoding, quoted-printable, octal or decimal dumps, xxd -e, a value wrapped inside a
// diff's '+' lines); an agent that holds a secret and wants it out can do any of these. Keeping
// secrets out of the agent's reach (kms, net) is what stops a determined agent. Secrets given
// to AddSecret stay in ordinary Go memory, with their encodings, for the Filter's lifetime.
// Redact removes what Scan finds in the whole text: where a hit starts or ends inside an
// escape sequence, what is left around it can decode differently read alone (llm scans what it
// sends again).
package secretfilter

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// Hit is one found secret: text[Start:End] and the rule that found it. It never holds the
// secret itself.
type Hit struct {
	Rule       string
	Start, End int
}

// Filter holds the rules and the harness's own secrets; make one with New. It is safe for
// concurrent use.
type Filter struct {
	rules    []rule
	kw       *keywords
	kwRule   []int // per keyword id, the rule it belongs to
	mu       sync.Mutex
	exact    atomic.Pointer[exactSet]
	allNames []string
}

// New returns a filter with the curated rules followed by extra, the policy's rules. It refuses
// a rule without a name or with a name already taken, an expression that does not compile
// (RE2) or that matches the empty string, and an empty keyword; the error names the rule.
// A policy rule's hit is its whole match, or its submatch named "secret" if it has one; its
// keywords are matched without regard to ASCII case, and when one occurs (or it has none) the
// expression runs over the whole text.
func New(extra []pbp.FilterRule) (*Filter, error) {
	f := &Filter{rules: curated(), allNames: []string{RuleHarnessSecret}}
	for _, r := range f.rules {
		f.allNames = append(f.allNames, r.name)
	}
	for _, p := range extra {
		if p.Name == "" || slices.Contains(f.allNames, p.Name) {
			return nil, fmt.Errorf("filter rule %q: name empty or already taken", p.Name)
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("filter rule %q: %w", p.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("filter rule %q: %w", p.Name, errMatchesEmpty)
		}
		if slices.Contains(p.Keywords, "") {
			return nil, fmt.Errorf("filter rule %q: %w", p.Name, errEmptyKeyword)
		}
		f.rules = append(f.rules, rule{name: p.Name, all: re, keywords: p.Keywords, group: max(re.SubexpIndex("secret"), 0)})
		f.allNames = append(f.allNames, p.Name)
	}
	var words []string
	for i, r := range f.rules {
		for _, k := range r.keywords {
			words, f.kwRule = append(words, k), append(f.kwRule, i)
		}
	}
	f.kw = newKeywords(words)
	f.exact.Store(newExactSet(nil, nil))
	return f, nil
}

var errMatchesEmpty, errEmptyKeyword = errors.New("the expression matches the empty string"), errors.New("a keyword is empty")

// AddSecret adds a secret the harness holds to layer 1; name labels it for Secrets and never
// appears in a hit. A secret shorter than MinSecretLen bytes is ignored (Secrets shows what was
// kept); adding a value already held does nothing. The filter keeps its own copy. Safe to call
// while other goroutines Scan: a scan sees the secrets held when it started.
//
// Layer 1 finds the secret raw; in base64, standard and URL-safe, padded or not, and inside a
// longer base64 text at any byte alignment (but for at most 4 bits of it at each end, which
// share a character with its neighbours and stay unredacted); in hex, in any mix of case (as a
// secret of lower-case hex digits is); with each space as '+'. It finds each of these also with
// any of their characters escaped, all or some, in views of the text where these escapes are
// decoded wherever they occur: %XX in either case; JSON's \uXXXX in either case (surrogate pairs
// joined), \" \\ \/ \b \f \n \r \t, and \xHH; HTML's &#N;, &#xH;, &amp; &lt; &gt; &quot;
// &apos;. That covers net/url's query and path escaping, encoding/json's output with or without
// HTML escaping, html.EscapeString's, and any encoder or agent that escapes a few characters
// (the e2e suite saw the key with each '-' as \u002d). A hit covers each escape it touches
// whole. Each view decodes once (an escape's output is not read again) and either one scheme or
// all of them: so a secret holding a '\', '%' or '&' is found escaped in one scheme if that
// scheme's own introducer is escaped (as its encoders do), but escaped in several schemes at once
// only if every '\', '%' and '&' in it is. \u escapes and entities stand for UTF-8. It finds all
// of these in the normaliser's views too (a hex dump of the secret, its base64 through od -c,
// with zero-width spaces inside), and with line breaks and the blanks around them removed, so
// that a secret, its base64 or its hex wrapped at any width or indented under a YAML key is
// found. Not: base32, double (%252D) or compressed encodings, escapes of other kinds (octal
// \055, %u002D, \u{2d}, other named entities, quoted-printable), hex with separators other
// than a dump's layout, a secret split, reversed or changed in case.
func (f *Filter) AddSecret(name string, secret []byte) {
	if len(secret) < MinSecretLen {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if x := f.exact.Load(); !containsBytes(x.secrets, secret) {
		f.exact.Store(newExactSet(append(slices.Clip(x.names), name), append(slices.Clip(x.secrets), bytes.Clone(secret))))
	}
}

// Secrets returns the names of the secrets layer 1 holds, in the order they were added.
func (f *Filter) Secrets() []string { return slices.Clone(f.exact.Load().names) }

// Rules returns the name of every rule, layer 1 first, then the curated and the policy rules.
func (f *Filter) Rules() []string { return slices.Clone(f.allNames) }

// Scan returns the hits in text, sorted by Start and not overlapping: overlapping hits are
// merged into one that keeps the name of the one starting first (of layer 1, then of the
// earliest rule, when they start together). Both layers read the text and each view the
// normaliser makes of it (normalise.go); a secret a view shows spread over several places of
// the text (a dump's lines, its hex and its text column) gives one hit per place.
func (f *Filter) Scan(text []byte) []Hit { return f.scan(text, normalised(text)) }

// scan is Scan over the views given, the text's own first.
func (f *Filter) scan(text []byte, views []normView) []Hit {
	x := f.exact.Load()
	var hits []Hit
	for _, n := range views {
		v := n.v
		emit := func(rule string, ivs []ival) { hits = hitsOf(text, rule, v.toRoot(ivs), hits) }
		if len(x.forms) > 0 {
			var l1 []Hit
			if n.esc {
				l1 = x.match(v.dec, nil)
			} else {
				l1 = x.find(v.dec, nil)
			}
			for _, h := range l1 {
				emit(h.Rule, []ival{{h.Start, h.End}})
			}
			if q := squeezedFor(x, v.dec); q != nil {
				if l1 := x.match(q, nil); len(l1) > 0 {
					sq := squeeze(v)
					for _, h := range l1 {
						hits = hitsOf(text, h.Rule, sq.toRoot([]ival{{h.Start, h.End}}), hits)
					}
				}
			}
		}
		f.layer2(v.dec, emit)
		f.decoded(v.dec, emit)
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if a.Start != b.Start || a.Rule == b.Rule {
			return cmp.Compare(a.Start, b.Start)
		}
		return cmp.Compare(slices.Index(f.allNames, a.Rule), slices.Index(f.allNames, b.Rule))
	})
	out := hits[:0]
	for _, h := range hits {
		if n := len(out); n > 0 && h.Start < out[n-1].End {
			out[n-1].End = max(out[n-1].End, h.End)
			continue
		}
		out = append(out, h)
	}
	return out
}

// layer2 calls emit with each rule's hits in text: the rule and the intervals of text that
// carry the secret (one, or one a line for a match joined over line breaks).
//
// A curated rule runs anchored at each occurrence of its keywords, except inside its previous
// match. Text made to defeat that (a keyword every few bytes, each starting a long near-match)
// could cost a window per occurrence; so once a rule's anchored runs have read more than
// 16 bytes per byte of text, it runs once over the whole text instead, like a policy rule, in
// the linear time RE2 guarantees (without joining lines).
func (f *Filter) layer2(text []byte, emit func(string, []ival)) {
	whole := make([]bool, len(f.rules))
	spent, done := make([]int, len(f.rules)), make([]int, len(f.rules))
	f.kw.find(text, func(id, at int) {
		at = f.kw.start(text, id, at)
		i := f.kwRule[id]
		switch r := &f.rules[i]; {
		case whole[i] || at < done[i]:
		case r.re == nil || spent[i] > 16*len(text)+1<<16:
			whole[i] = true
		default:
			done[i], spent[i] = r.matchAt(text, at, emit, spent[i])
		}
	})
	for i := range f.rules {
		if r := &f.rules[i]; whole[i] || len(r.keywords) == 0 {
			for _, m := range r.all.FindAllSubmatchIndex(text, -1) {
				if s, e, ok := r.accept(text, 0, m); ok {
					emit(r.name, []ival{{s, e}})
				}
			}
		}
	}
}

// b64Std maps the characters of both base64 alphabets to the standard one, others to 0.
var b64Std = func() (m [256]byte) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		m[c] = c
	}
	m['-'], m['_'] = '+', '/'
	return m
}()

// minRun is the shortest base64 run that decoded reaches the length of the shortest curated
// format (20 bytes, an AWS access key id).
const minRun = 27

// decoded calls emit with the rules' hits in each run of base64 (standard or URL-safe alphabet,
// at least minRun characters), decoded once, as credentials in Kubernetes secrets, Docker
// configurations or `echo … | base64 -d` commands are. A run goes on over a line break between
// two of its characters, so base64 wrapped at any width (base64, base64 -w N, PEM bodies) reads
// whole. A hit covers the encoded characters that carry any bit of it, line by line. The
// rules see no base64 within base64; layer 1 covers the harness's own secrets in the forms
// AddSecret lists.
func (f *Filter) decoded(text []byte, emit func(string, []ival)) {
	j := &joinedText{text: text} // one for every run: most runs are short and go no further
	for i := 0; i+minRun <= len(text); {
		// A run of minRun characters at or after i holds text[i+minRun-1], or a line break
		// inside one: probe that first, which skips minRun bytes of ordinary text at a time.
		k := i + minRun - 1
		if c := text[k]; b64Std[c] == 0 && c != '\n' && c != '\r' {
			i = k + 1
			continue
		}
		j.cuts = j.cuts[:0]
		s, e := k, k
		for s > i {
			if b64Std[text[s-1]] != 0 {
				s--
			} else if p := breakBefore(text, s); p > i && b64Std[text[p-1]] != 0 && s < len(text) && b64Std[text[s]] != 0 {
				j.cuts = append(j.cuts, ival{p, s})
				s = p
			} else {
				break
			}
		}
		slices.Reverse(j.cuts)
		for e < len(text) {
			if b64Std[text[e]] != 0 {
				e++
			} else if q := breakEnd(text, e); q > 0 && e > s && b64Std[text[e-1]] != 0 && q < len(text) && b64Std[text[q]] != 0 {
				j.cuts = append(j.cuts, ival{e, q})
				e = q
			} else {
				break
			}
		}
		j.at = s
		n := e - s
		for _, c := range j.cuts {
			n -= c.b - c.a
		}
		if n >= minRun {
			run := j.prefix(n)
			if n%4 == 1 {
				run = run[:n-1] // a lone last character carries no byte
			}
			for k, c := range run {
				run[k] = b64Std[c]
			}
			dec, _ := base64.RawStdEncoding.AppendDecode(nil, run) // decodes up to an error
			j := &joinedText{text: text, at: j.at, cuts: slices.Clone(j.cuts)}
			f.layer2(dec, func(rule string, ivs []ival) {
				var out []ival
				for _, iv := range ivs {
					// Character k holds bits 6k to 6k+5 of the decoded bytes.
					out = append(out, j.spans(8*iv.a/6, min(n, (8*iv.b-1)/6+1))...)
				}
				emit(rule, out)
			})
		}
		i = e + 1
	}
}

// matchAt runs r's anchored expression at offset at (rule.run), then again with line breaks
// removed where the candidate ends at one and continues on the next line (rule.join). It
// calls emit with the hit, and returns where the match ended (at if none) and spent plus the
// bytes it gave the expression.
func (r *rule) matchAt(text []byte, at int, emit func(string, []ival), spent int) (int, int) {
	if r.wordStart && at > 0 && syntax.IsWordChar(rune(text[at-1])) {
		return at, spent
	}
	_, m, spent := r.run(func(n int) []byte { return text[at:min(len(text), at+n)] }, spent)
	ivs, end, spent := r.join(text, at, m, spent)
	if ivs != nil {
		emit(r.name, ivs)
		return end, spent
	}
	if m == nil {
		return at, spent
	}
	if s, e, ok := r.accept(text, at, m); ok {
		emit(r.name, []ival{{s, e}})
	}
	return at + m[1], spent
}

// run runs r's anchored expression over the first r.after bytes of what src gives (src(n) is
// the first n bytes of a text, fewer at its end), and over twice as many while the match ends
// near the end of what it was given (where a cut could have stopped it: within a line separator
// of a PEM body, say). It returns the bytes it last read, the match in them and spent plus the
// bytes it read.
func (r *rule) run(src func(n int) []byte, spent int) ([]byte, []int, int) {
	for n := r.after; ; n *= 2 {
		t := src(n)
		m := r.re.FindSubmatchIndex(t)
		spent += len(t)
		if m != nil && m[1]+cutSlack >= len(t) && len(t) == n {
			continue
		}
		return t, m, spent
	}
}

const cutSlack = 16

// accept returns the secret of match m (offsets from base) in text, unless there is none, it
// is empty, it is below the rule's entropy floor or the rule skips it.
func (r *rule) accept(text []byte, base int, m []int) (int, int, bool) {
	if m == nil || m[2*r.group] < 0 || m[2*r.group] == m[2*r.group+1] {
		return 0, 0, false
	}
	s, e := base+m[2*r.group], base+m[2*r.group+1]
	if r.cut != nil {
		e = s + r.cut(text[s:e])
	}
	return s, e, r.acceptable(text[base+m[0]:base+m[1]], text[s:e])
}

// acceptable reports whether secret, found in match, is above r's entropy floor and not skipped.
func (r *rule) acceptable(match, secret []byte) bool {
	return !(r.minEntropy > 0 && entropy(secret) < r.minEntropy || r.skip != nil && r.skip(match, secret))
}

// Redact returns a copy of text with each hit replaced by "[REDACTED:<rule>]", and the hits.
// The same text always gives the same output.
func (f *Filter) Redact(text []byte) ([]byte, []Hit) {
	hits := f.Scan(text)
	out := make([]byte, 0, len(text))
	last := 0
	for _, h := range hits {
		out = fmt.Appendf(out, "%s[REDACTED:%s]", text[last:h.Start], h.Rule)
		last = h.End
	}
	return append(out, text[last:]...), hits
}
