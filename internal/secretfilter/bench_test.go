package secretfilter

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/logging"
)

// The benchmarks compare the filter with a named peer in the same run (issue: secret filter):
//
//	go test -run '^$' -bench . -benchtime 3x ./internal/secretfilter
//
// BenchmarkScan: Filter.Scan (one harness secret held, as in llm) against gitleaks v8's
// detector with its default configuration and decoding on (MaxDecodeDepth 5, the gitleaks CLI
// default), over the same documents: the labelled corpus, the tool corpus (2.4 MB of dumps and
// wrapped, escaped and encoded files) and 4 MiB of deterministic source-code-like text, cut
// into documents of at most 16 KiB (a message or a tool result).
// gitleaks is also run with decoding off, for scale. Reported: MB/s of each, "×gitleaks-decodeN"
// (our MB/s over that configuration's, measured in the same run), and on the labelled corpus
// the recall (true-positive cases with at least one hit) and precision (cases with a hit that
// are true positives) of each. The corpus was written for this filter's rules, which favours
// it on recall; gitleaks knows far more providers than the corpus holds.
//
// BenchmarkExact: layer 1's matcher against one bytes.Index pass per encoded form, the simple
// alternative, with 1 and 8 secrets held.

const benchDocSize = 16 << 10

var benchWords = strings.Fields(`func return if else for range err nil ctx context string int
	byte error struct type interface map slice append len make new go defer select case switch
	client server request response handler config options token key secret auth password user
	header bearer authorization session cookie cache store value name path file reader writer
	buffer parse encode decode json yaml http https url host port proxy policy filter rule match
	access credential api id hash digest sign verify public private cert tls manifest component`)

// benchText is deterministic source-code-like text: Go-ish lines, comments, string literals,
// digests, UUIDs, URLs and go.sum lines, with the words that trigger both tools' keyword
// prefilters at the rate code has them.
func benchText(size int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string { return benchWords[r.IntN(len(benchWords))] }
	hexs := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[r.IntN(16)]
		}
		return string(b)
	}
	var b bytes.Buffer
	for b.Len() < size {
		switch r.IntN(12) {
		case 0:
			fmt.Fprintf(&b, "func (%s *%s) %s(%s %s, %s []byte) (%s, error) {\n", word()[:1], strings.ToUpper(word()[:1])+word(), strings.ToUpper(word()[:1])+word(), word(), word(), word(), word())
		case 1:
			fmt.Fprintf(&b, "\t// %s %s %s %s the %s %s, %s %s.\n", word(), word(), word(), word(), word(), word(), word(), word())
		case 2:
			fmt.Fprintf(&b, "\tif err := %s.%s(%s); err != nil {\n\t\treturn fmt.Errorf(\"%s %%s: %%w\", %s, err)\n\t}\n", word(), word(), word(), word(), word())
		case 3:
			fmt.Fprintf(&b, "\t%s := os.Getenv(\"%s_%s\")\n", word(), strings.ToUpper(word()), strings.ToUpper(word()))
		case 4:
			fmt.Fprintf(&b, "\tconst %sDigest = \"sha256:%s\"\n", word(), hexs(64))
		case 5:
			fmt.Fprintf(&b, "\t%s.Header.Set(\"%s\", \"%s-%s\")\n", word(), word(), word(), hexs(8))
		case 6:
			fmt.Fprintf(&b, "github.com/%s/%s v1.%d.%d h1:%s=\n", word(), word(), r.IntN(20), r.IntN(20), hexs(43))
		case 7:
			fmt.Fprintf(&b, "\turl := \"https://%s.example.com/%s/%s?%s=%s\"\n", word(), word(), word(), word(), hexs(12))
		case 8:
			fmt.Fprintf(&b, "\t{name: %q, %s: %q, want: %s},\n", word()+" "+word(), word(), hexs(8)+"-"+hexs(4)+"-"+hexs(4)+"-"+hexs(4)+"-"+hexs(12), word())
		default:
			fmt.Fprintf(&b, "\t%s, %s := %s.%s(%s, %s)\n", word(), word(), word(), word(), word(), word())
		}
	}
	return b.Bytes()
}

// benchDocs is the mixed input: the corpus, then the source text cut into documents.
func benchDocs(b *testing.B) ([][]byte, int) {
	var docs [][]byte
	total := 0
	for _, tc := range loadCorpus(b) {
		docs = append(docs, []byte(tc.Text))
	}
	src := benchText(4 << 20)
	for len(src) > 0 {
		n := min(benchDocSize, len(src))
		docs = append(docs, src[:n])
		src = src[n:]
	}
	for _, d := range docs {
		total += len(d)
	}
	return docs, total
}

func gitleaksDetector(b testing.TB, decodeDepth int) *detect.Detector {
	logging.Logger = logging.Logger.Level(zerolog.Disabled)
	d, err := detect.NewDetectorDefaultConfig()
	if err != nil {
		b.Fatal(err)
	}
	d.MaxDecodeDepth = decodeDepth
	return d
}

// quality is case-level recall and precision on the labelled corpus for a detector that says
// whether a text holds a secret.
func quality(b *testing.B, found func(string) bool) (recall, precision float64) {
	var tp, fn, fp int
	var missed, flagged []string
	for _, tc := range loadCorpus(b) {
		switch hit := found(tc.Text); {
		case hit && len(tc.Want) > 0:
			tp++
		case len(tc.Want) > 0:
			fn++
			missed = append(missed, tc.Name)
		case hit:
			fp++
			flagged = append(flagged, tc.Name)
		}
	}
	b.Logf("missed %d true positives %v; flagged %d near misses %v", fn, missed, fp, flagged)
	return float64(tp) / float64(tp+fn), float64(tp) / float64(max(1, tp+fp))
}

func BenchmarkScan(b *testing.B) {
	docs, total := benchDocs(b)
	scanBench(b, docs, total, true)
}

// BenchmarkScanTools is BenchmarkScan over the tool corpus: 2.4 MB of what real tools printed
// over files of fake secrets (dumps, wrapped, escaped and encoded files, and the files
// themselves), where the normaliser has the most to do; recall and precision are those of
// TestToolCorpusReport.
func BenchmarkScanTools(b *testing.B) {
	var docs [][]byte
	total := 0
	for _, tc := range loadToolCorpus(b) {
		docs, total = append(docs, tc.text), total+len(tc.text)
	}
	scanBench(b, docs, total, false)
}

// scanBench runs the filter and gitleaks over docs, reporting the ratio of their throughputs
// and, with quality, recall and precision on the labelled corpus.
func scanBench(b *testing.B, docs [][]byte, total int, withQuality bool) {
	peers := map[string]float64{} // MB/s of each gitleaks configuration
	for _, depth := range []int{5, 0} {
		name := fmt.Sprintf("gitleaks-decode%d", depth)
		b.Run("baseline="+name, func(b *testing.B) {
			d := gitleaksDetector(b, depth)
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, doc := range docs {
					d.DetectBytes(doc)
				}
			}
			peers[name] = float64(total) * float64(b.N) / b.Elapsed().Seconds() / 1e6
			if withQuality {
				recall, precision := quality(b, func(s string) bool { return len(d.DetectString(s)) > 0 })
				b.ReportMetric(recall, "recall")
				b.ReportMetric(precision, "precision")
			}
		})
	}
	b.Run("secretfilter", func(b *testing.B) {
		f := newTestFilter(b)
		var recall, precision float64
		if withQuality {
			recall, precision = quality(b, func(s string) bool { return len(f.Scan([]byte(s))) > 0 })
		}
		f.AddSecret("anthropic-api-key", testSecrets[0])
		b.SetBytes(int64(total))
		for b.Loop() {
			for _, doc := range docs {
				f.Scan(doc)
			}
		}
		ours := float64(total) * float64(b.N) / b.Elapsed().Seconds() / 1e6
		for name, mbs := range peers {
			b.ReportMetric(ours/mbs, "×"+name)
		}
		if withQuality {
			b.ReportMetric(recall, "recall")
			b.ReportMetric(precision, "precision")
		}
	})
}

// BenchmarkNormalise: Scan against the same scan of the text alone (baseline=text-only: no
// view of the normaliser, the layers over the text as it is), over ordinary source-like text
// and over the tool corpus (dumps, wrapped and escaped files, and the files themselves); the
// ratio is what the normaliser costs.
func BenchmarkNormalise(b *testing.B) {
	tools := [][]byte{}
	for _, tc := range loadToolCorpus(b) {
		tools = append(tools, tc.text)
	}
	src, _ := benchDocs(b)
	for _, set := range []struct {
		name string
		docs [][]byte
	}{{"source", src}, {"tools", tools}} {
		total := 0
		for _, d := range set.docs {
			total += len(d)
		}
		f := newTestFilter(b)
		f.AddSecret("anthropic-api-key", testSecrets[0])
		var baseline float64
		b.Run(set.name+"/baseline=text-only", func(b *testing.B) {
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, d := range set.docs {
					f.scan(d, []normView{{v: &view{dec: d}}})
				}
			}
			baseline = b.Elapsed().Seconds() / float64(b.N)
		})
		b.Run(set.name+"/normalised", func(b *testing.B) {
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, d := range set.docs {
					f.Scan(d)
				}
			}
			if baseline > 0 {
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/baseline, "×text-only-time")
			}
		})
	}
}

func BenchmarkExact(b *testing.B) {
	docs, total := benchDocs(b)
	for _, n := range []int{1, 8} {
		var secrets [][]byte
		for i := range n {
			secrets = append(secrets, fmt.Appendf(nil, "sk-ant-api03-%03d%s", i, strings.Repeat("Zq3_x-Lm9P", 9)))
		}
		x := newExactSet(make([]string, n), secrets)
		var baseline float64
		b.Run(fmt.Sprintf("secrets=%d/baseline=bytes.Index-per-form", n), func(b *testing.B) {
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, doc := range docs {
					for _, form := range x.forms {
						for i := 0; ; {
							j := bytes.Index(doc[i:], form)
							if j < 0 {
								break
							}
							i += j + 1
						}
					}
				}
			}
			baseline = b.Elapsed().Seconds() / float64(b.N)
		})
		b.Run(fmt.Sprintf("secrets=%d/fingerprint", n), func(b *testing.B) {
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, doc := range docs {
					x.find(doc, nil)
				}
			}
			if baseline > 0 {
				b.ReportMetric(baseline/(b.Elapsed().Seconds()/float64(b.N)), "×bytes.Index")
			}
		})
	}
}

// adversarialShapes are texts made to make a keyword-anchored scanner slow: a keyword every few
// bytes, each starting a long near-match or a match that runs to the end of the text.
var adversarialShapes = map[string]string{
	"eyJ":         "eyJ",
	"BEGIN":       "-----BEGIN",
	"url":         "://a",
	"bearer":      "bearer ",
	"aws":         "aws=",
	"sk-":         "sk-",
	"auth":        "authorization: ",
	"private_key": `"private_key": "-----BEGIN PRIVATE KEY-----\nAAAA`,
	"base64":      "QUtJQU",
	"xoxb":        "xoxb-1-",
	"escapes":     `\u002d%2D&#45;`, // every escape scheme: four views, each full of escapes
	// The normaliser's views: a keyword cut at each line end (joins), dump lines, od -c
	// fields, invisible and look-alike characters, cat -A lines.
	"wrapped":  "sk-a\nnt-",
	"xxd":      "00000000: 736b 2d61 6e74 2d61 7069 3033 2d41 4243  sk-ant-api03-ABC\n",
	"od-c":     "   s   k   -   a   n   t   -   a   p   i   0   3   -   A   B   C\n",
	"unicode":  "А\u200b",
	"cat-A":    "sk-ant-^I$\n",
	"base64-w": "c2stYW50LWFwaTAzLQ\n",
	// Every view at once: cat -A lines that are od -c lines, with escapes and look-alikes.
	"all-views": "0000000   s   k   -   a   \\   u   0   0   4   1   M   -   b$\n\u0041А\u200b$\n",
}

// BenchmarkAdversarial reports Scan's throughput on 1 MiB of each shape, against the mixed
// input as the baseline: the ratio shows how much slower the worst case is.
func BenchmarkAdversarial(b *testing.B) {
	f := newTestFilter(b)
	f.AddSecret("anthropic-api-key", testSecrets[0]) // as llm holds it
	var baseline float64
	b.Run("baseline=mixed", func(b *testing.B) {
		text := benchText(1 << 20)
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			f.Scan(text)
		}
		baseline = b.Elapsed().Seconds() / float64(b.N)
	})
	for name, unit := range adversarialShapes {
		b.Run(name, func(b *testing.B) {
			text := bytes.Repeat([]byte(unit), 1<<20/len(unit))
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				f.Scan(text)
			}
			if baseline > 0 {
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/baseline, "×mixed-time")
			}
		})
	}
}
