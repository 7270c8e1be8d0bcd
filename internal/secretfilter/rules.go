package secretfilter

import (
	"bytes"
	"hash/crc32"
	"math"
	"regexp"
	"regexp/syntax"
	"strings"
)

// rule is one layer-2 rule. A curated rule's match starts at one of its keywords: at each
// keyword occurrence the expression runs anchored there, over the next after bytes, and again
// over twice as many while a match reaches that end, so after bounds the cost of a keyword that
// leads nowhere, not the length of a secret. A policy rule runs over the whole text when one of
// its keywords occurs, or always if it has none.
type rule struct {
	name       string
	re         *regexp.Regexp // anchored, for a run at a keyword; nil for a policy rule
	all        *regexp.Regexp // unanchored, for a run over the whole text
	keywords   []string
	group      int  // submatch that is the secret, "secret" if the expression names one, else 0
	wordStart  bool // the match must start at a word boundary (the expression began with \b)
	spaced     bool // the expression can match white space (rule.blindBreak)
	after      int
	minEntropy float64 // bits per byte of the secret below which a match is not a secret
	skip       func(match, secret []byte) bool
	cut        func(secret []byte) int // the secret's length where its format says it ends, if it does
}

// pemBlock matches a PEM or PGP armoured private key: the BEGIN line and its body, lines of
// base64 or armour headers (Proc-Type, DEK-Info, Version), separated by whitespace or by the
// two-character escapes \n and \r of JSON, YAML and shell strings, and the END line if it is
// there: a truncated key (head -5 id_rsa) still carries key material. The body may follow the
// BEGIN line with no separator at all, as `paste -sd ""` glues it.
const pemBlock = `-----BEGIN[ A-Z0-9_-]{0,40}PRIVATE KEY(?: BLOCK)?-----` +
	`(?:\s|\\r|\\n)*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z][A-Za-z0-9-]*:[^\\\r\n]*)` +
	`(?:(?:\s|\\r|\\n)+(?:[A-Za-z0-9+/=]{16,}|[A-Za-z][A-Za-z0-9-]*:[^\\\r\n]*))*` +
	`(?:(?:\s|\\r|\\n)+[A-Za-z0-9+/=]+)?` +
	`(?:(?:\s|\\r|\\n)*-----END[ A-Z0-9_-]{0,40}PRIVATE KEY(?: BLOCK)?-----)?`

// curated are the built-in rules, in the order that names a merged hit when two start at the
// same byte (the more specific rule first). Expressions are RE2; keywords are matched without
// regard to ASCII case. Entropy floors (bits per byte of the secret) sit well below the lowest
// entropy of 200 000 random tokens of each format and above placeholders such as
// sk-ant-api03-XXXX… or AKIAXXXXXXXXXXXXXXXX, so they cost no recall on real keys
// (TestRandomTokens).
func curated() []rule {
	return []rule{
		// Anthropic: API keys (sk-ant-api03-), Claude Code OAuth access and refresh tokens
		// (sk-ant-oat01-, sk-ant-ort01-), claude.ai session keys; admin keys apart.
		mk("anthropic-api-key", `\bsk-ant-(?:api|oat|ort|sid)\d\d-[\w-]{40,}`, 256, 3, nil, "sk-ant-"),
		mk("anthropic-admin-key", `\bsk-ant-admin\d\d-[\w-]{40,}`, 256, 3, nil, "sk-ant-admin"),
		// OpenAI: project, service-account and admin keys, and the legacy sk-… keys, which all
		// carry "T3BlbkFJ" (base64 of "OpenAI").
		mk("openai-api-key", `\bsk-(?:(?:proj|svcacct|admin)-[\w-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})`, 256, 3, nil, "sk-"),
		// AWS documents AKIAIOSFODNN7EXAMPLE and wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in
		// every guide: they are not secrets, and a random key ends in EXAMPLE with probability
		// 32^-7, so they are skipped rather than redacted all over pasted documentation.
		// No word boundary after the 20 characters: `paste -sd ""` glues the id to whatever
		// followed it (issue 21), and a random id is never followed by more of its alphabet
		// any less than other text is.
		mk("aws-access-key-id", `\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}`, 48, 2,
			func(m, _ []byte) bool { return bytes.HasSuffix(m, []byte("EXAMPLE")) }, "akia", "asia", "abia", "acca", "a3t"),
		// A secret access key is 40 base64 characters, which ordinary text also has (paths,
		// digests): it needs a key name before it, and is not all lower-case hex like a git
		// commit (a random key is with probability 4^-40). What follows the 40 is not more
		// base64, so that the first 40 characters of a longer value are not taken, unless it
		// is the next line's key glued on by `paste -sd ""` (…KEYregion = eu-west-1): a name
		// and a '=' or ':' followed by a value, where base64 has at most padding.
		mk("aws-secret-access-key", `(?i)(?:aws|secret_?access_?key)[\w.-]*?["']?\s*[:=]{1,2}>?\s*["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$|[A-Za-z_][A-Za-z0-9_]{2,}\s*[:=]\s*[^\s="'])`,
			160, 3, func(_, s []byte) bool { return bytes.Contains(s, []byte("EXAMPLE")) || hexDigest.Match(s) },
			"aws", "secret_access_key", "secretaccesskey"),
		withCut(mk("github-token", `\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{36,})`, 300, 3, nil,
			"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), githubCut),
		mk("gitlab-token", `\bgl(?:pat|dt|rt|ptt)-[\w.-]{20,}`, 320, 3, nil, "glpat-", "gldt-", "glrt-", "glptt-"),
		mk("slack-token", `\b(?:xox[abposre]-\d+-[\w-]{10,}|xapp-\d-[\w-]{20,})`, 300, 3, nil, "xox", "xapp-"),
		mk("slack-webhook", `\bhooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[\w/+-]{20,})`, 340, 3, nil, "hooks.slack.com"),
		mk("google-api-key", `\bAIza[\w-]{35}`, 64, 3, nil, "aiza"),
		// Before private-key, so that a service account's key is named as such.
		mk("gcp-service-account-key", `"private_key"\s*:\s*"(?P<secret>-----BEGIN[ A-Z]{0,20}PRIVATE KEY-----(?:\\n|[A-Za-z0-9+/=])+(?:-----END[ A-Z]{0,20}PRIVATE KEY-----(?:\\n)?)?)`,
			1024, 0, nil, `"private_key"`),
		mk("stripe-key", `\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}`, 260, 3, nil, "sk_live_", "rk_live_", "sk_test_", "rk_test_"),
		mk("npm-token", `\bnpm_[A-Za-z0-9]{36}`, 64, 3.5, nil, "npm_"),
		// PyPI tokens are macaroons whose first bytes encode the issuer, pypi.org or test.pypi.org.
		mk("pypi-token", `\bpypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[\w-]{50,}`, 512, 0, nil, "pypi-age"),
		mk("private-key", pemBlock, 1024, 0, nil, "-----begin"),
		mk("jwt", `\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*`, 1024, 0, nil, "eyj"),
		// Authorization headers in any spelling a log, a curl command or code shows them; the
		// Bearer form also alone. Placeholders and template variables are not secrets.
		mk("bearer-token", `\b(?i)(?:authorization["']?\s*[:=]\s*["']?(?:bearer|token)|bearer)\s+(?P<secret>[\w.~+/-]{16,}=*)`,
			256, 2, func(_, s []byte) bool { return placeholder.Match(s) }, "bearer", "authorization"),
		mk("basic-auth", `\b(?i)authorization["']?\s*[:=]\s*["']?basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})`,
			128, 0, func(_, s []byte) bool { return placeholder.Match(s) }, "authorization"),
		// scheme://user:password@host. A password is redacted whatever its entropy (hunter2 is
		// still a password), except masks, placeholders and hosts reserved for examples (RFC 2606).
		mk("url-credentials", `://(?P<secret>[^\s:/?#@"'<>\[\]{}$\\]*:[^\s/?#@"'<>\[\]{}$\\]+)@[A-Za-z0-9.-]*[A-Za-z0-9]`,
			1024, 0, exampleCredentials, "://"),
	}
}

// mk compiles a curated rule. A leading \b becomes a check of the byte before the keyword,
// which the anchored expression does not see.
func mk(name, expr string, after int, minEntropy float64, skip func(m, s []byte) bool, keywords ...string) rule {
	all := regexp.MustCompile(expr)
	expr, wordStart := strings.CutPrefix(expr, `\b`)
	re := regexp.MustCompile(`^(?:` + expr + `)`)
	return rule{name: name, re: re, all: all, keywords: keywords, group: max(re.SubexpIndex("secret"), 0),
		wordStart: wordStart, spaced: matchesSpace(expr), after: after, minEntropy: minEntropy, skip: skip}
}

// matchesSpace reports whether expr has a literal, a class or a wildcard that matches a space
// or a tab.
func matchesSpace(expr string) bool {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return true
	}
	var walk func(*syntax.Regexp) bool
	walk = func(re *syntax.Regexp) bool {
		switch re.Op {
		case syntax.OpLiteral:
			return strings.ContainsAny(string(re.Rune), " \t")
		case syntax.OpCharClass:
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if re.Rune[i] <= ' ' && ' ' <= re.Rune[i+1] || re.Rune[i] <= '\t' && '\t' <= re.Rune[i+1] {
					return true
				}
			}
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			return true
		}
		for _, sub := range re.Sub {
			if walk(sub) {
				return true
			}
		}
		return false
	}
	return walk(re)
}

func withCut(r rule, cut func([]byte) int) rule {
	r.cut = cut
	return r
}

// githubCut ends a gh?_ token after its 36 characters when they check out: GitHub's tokens end
// in the CRC32 of their 30 random characters, in 6 base62 digits
// (github.blog/2021-04-05-behind-githubs-new-authentication-token-formats). A token that
// `paste -sd ""` glued to the next line ("ghp_…GH_REPO=x") is then redacted alone, not with the
// "GH" that follows it. A token that does not check out (a made-up one) is taken whole.
func githubCut(secret []byte) int {
	const n = 4 + 30 + 6
	if len(secret) <= n || secret[3] != '_' {
		return len(secret)
	}
	sum, digits := crc32.ChecksumIEEE(secret[4:34]), secret[34:n]
	for i := 5; i >= 0; i-- {
		if base62[sum%62] != digits[i] {
			return len(secret)
		}
		sum /= 62
	}
	if sum != 0 {
		return len(secret)
	}
	return n
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// placeholder matches the usual stand-ins for a secret in documentation and templates. Case
// matters, so that a random 32-character token contains one by chance with probability ~1e-5.
var placeholder = regexp.MustCompile(`xxxx|XXXX|\*\*\*\*|\.\.\.|your|YOUR|Your|example|EXAMPLE|%s|%\(|<|\{\{`)

// hexDigest matches a git commit or a digest in lower-case hex.
var hexDigest = regexp.MustCompile(`^[0-9a-f]+$`)

// reservedHost matches the names RFC 2606 reserves for documentation and tests.
var reservedHost = regexp.MustCompile(`(?i)(?:^|\.)(?:example\.(?:com|net|org)|example|invalid|test)$`)

// exampleCredentials skips user:password (s) in a URL (m) when the password is a mask or a
// placeholder, or the host cannot be real.
func exampleCredentials(m, s []byte) bool {
	_, pass, _ := bytes.Cut(s, []byte(":"))
	host := m[bytes.LastIndexByte(m, '@')+1:]
	return placeholder.Match(pass) || len(bytes.Trim(pass, "*xX")) == 0 || reservedHost.Match(host)
}

// entropy is the Shannon entropy of b in bits per byte.
func entropy(b []byte) float64 {
	var n [256]int
	for _, c := range b {
		n[c]++
	}
	h := 0.0
	for _, k := range n {
		if k > 0 {
			p := float64(k) / float64(len(b))
			h -= p * math.Log2(p)
		}
	}
	return h
}
