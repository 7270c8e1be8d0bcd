package egress

import (
	"errors"
	"strings"
	"testing"
)

// hostCases is shared with the fuzz seeds. want is the normal form, or empty when rule refuses.
var hostCases = []struct {
	name, in, want, rule string
}{
	{"plain", "example.com", "example.com", ""},
	{"upper case", "ExAmPle.COM", "example.com", ""},
	{"trailing dot", "example.com.", "example.com", ""},
	{"two trailing dots", "example.com..", "", RuleInvalidHost},
	{"single label", "intranet", "intranet", ""},
	{"hyphen inside", "my-host.example", "my-host.example", ""},
	{"digits inside", "a1.b2.example", "a1.b2.example", ""},
	{"numeric first label", "123.example.com", "123.example.com", ""},
	{"ip-shaped name", "169.254.169.254.nip.io", "169.254.169.254.nip.io", ""},
	{"idna u-label", "bücher.example", "xn--bcher-kva.example", ""},
	{"idna a-label kept", "xn--bcher-kva.example", "xn--bcher-kva.example", ""},
	{"full-width letters", "ｅｘａｍｐｌｅ．ｃｏｍ", "example.com", ""},
	{"ideographic full stop", "example。com", "example.com", ""},
	{"empty", "", "", RuleInvalidHost},
	{"only a dot", ".", "", RuleInvalidHost},
	{"leading dot", ".example.com", "", RuleInvalidHost},
	{"empty label", "a..b", "", RuleInvalidHost},
	{"leading hyphen", "-a.example", "", RuleInvalidHost},
	{"trailing hyphen", "a-.example", "", RuleInvalidHost},
	{"underscore", "a_b.example", "", RuleInvalidHost},
	{"space", "a b.example", "", RuleInvalidHost},
	{"slash", "a/b.example", "", RuleInvalidHost},
	{"at sign", "user@example.com", "", RuleInvalidHost},
	{"percent", "ex%61mple.com", "", RuleInvalidHost},
	{"nul", "a\x00.example", "", RuleInvalidHost},
	{"wildcard", "*.example.com", "", RuleInvalidHost},
	{"bad punycode", "xn--zz.example", "", RuleInvalidHost},
	{"label of 64", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", "", RuleInvalidHost},
	{"too long", longName(254), "", RuleInvalidHost},
	{"longest", longName(253), longName(253), ""},
	{"dotted quad", "127.0.0.1", "", RuleIPLiteral},
	{"dotted quad trailing dot", "127.0.0.1.", "", RuleIPLiteral},
	{"public dotted quad", "8.8.8.8", "", RuleIPLiteral},
	{"decimal", "2130706433", "", RuleIPLiteral},
	{"octal", "0177.0.0.1", "", RuleIPLiteral},
	{"octal whole", "017700000001", "", RuleIPLiteral},
	{"hex", "0x7f.1", "", RuleIPLiteral},
	{"hex whole", "0x7f000001", "", RuleIPLiteral},
	{"hex upper", "0X7F.0.0.1", "", RuleIPLiteral},
	{"hex empty", "0x.0x.0x.0x", "", RuleIPLiteral},
	{"short two", "127.1", "", RuleIPLiteral},
	{"short private", "10.1", "", RuleIPLiteral},
	{"short three", "192.168.1", "", RuleIPLiteral},
	{"metadata", "169.254.169.254", "", RuleIPLiteral},
	{"full-width digits", "１２７.０.０.１", "", RuleIPLiteral},
	{"full-width dots", "127。0。0。1", "", RuleIPLiteral},
	{"bracketed v6", "[::1]", "", RuleIPLiteral},
	{"bare v6", "::1", "", RuleIPLiteral},
	{"v4-mapped v6", "::ffff:127.0.0.1", "", RuleIPLiteral},
	{"v4-compatible v6", "::127.0.0.1", "", RuleIPLiteral},
	{"nat64 v6", "64:ff9b::7f00:1", "", RuleIPLiteral},
	{"zoned v6", "fe80::1%eth0", "", RuleIPLiteral},
	{"bracketed v4", "[127.0.0.1]", "", RuleIPLiteral},
	{"five numeric labels", "1.2.3.4.5", "", RuleNumericHost},
	{"numeric tld", "example.123", "", RuleNumericHost},
	{"hex tld", "example.0x1f", "", RuleNumericHost},
	{"overlong decimal", "99999999999999", "", RuleIPLiteral},
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
		if i%62 == 61 {
			b[i] = '.'
		}
	}
	return string(b)
}

func TestNormalizeHost(t *testing.T) {
	for _, tc := range hostCases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NormalizeHost(tc.in)
			if tc.rule == "" {
				if err != nil || h.String() != tc.want {
					t.Fatalf("NormalizeHost(%q) = %q, %v; want %q", tc.in, h, err, tc.want)
				}
				return
			}
			var he *HostError
			if !errors.As(err, &he) || he.Rule != tc.rule {
				t.Fatalf("NormalizeHost(%q) = %q, %v; want refusal by %s", tc.in, h, err, tc.rule)
			}
			if !h.IsZero() {
				t.Fatalf("NormalizeHost(%q) refused but returned %q", tc.in, h)
			}
		})
	}
}

var authorityCases = []struct {
	name, in, host string
	port           uint16
	rule           string
}{
	{"plain", "example.com:443", "example.com", 443, ""},
	{"upper case and dot", "Example.COM.:8443", "example.com", 8443, ""},
	{"max port", "example.com:65535", "example.com", 65535, ""},
	{"no port", "example.com", "", 0, RuleBadAuthority},
	{"empty port", "example.com:", "", 0, RuleBadAuthority},
	{"port zero", "example.com:0", "", 0, RuleBadAuthority},
	{"leading zero", "example.com:0443", "", 0, RuleBadAuthority},
	{"port too big", "example.com:65536", "", 0, RuleBadAuthority},
	{"port huge", "example.com:99999999999999999999", "", 0, RuleBadAuthority},
	{"signed port", "example.com:+443", "", 0, RuleBadAuthority},
	{"named port", "example.com:https", "", 0, RuleBadAuthority},
	{"no host", ":443", "", 0, RuleBadAuthority},
	{"empty", "", "", 0, RuleBadAuthority},
	{"userinfo", "user@example.com:443", "", 0, RuleInvalidHost},
	{"path", "example.com/x:443", "", 0, RuleInvalidHost},
	{"two ports", "example.com:443:443", "", 0, RuleInvalidHost},
	{"bracket garbage", "[example.com]:443", "", 0, RuleIPLiteral},
	{"bracket no port", "[::1]", "", 0, RuleBadAuthority},
	{"ipv4", "127.0.0.1:443", "", 0, RuleIPLiteral},
	{"decimal", "2130706433:443", "", 0, RuleIPLiteral},
	{"bracketed v6", "[::1]:443", "", 0, RuleIPLiteral},
	{"bracketed mapped", "[::ffff:169.254.169.254]:80", "", 0, RuleIPLiteral},
	{"bare v6", "::1:443", "", 0, RuleIPLiteral},
	{"numeric tld", "a.1:443", "", 0, RuleNumericHost},
}

func TestParseAuthority(t *testing.T) {
	for _, tc := range authorityCases {
		t.Run(tc.name, func(t *testing.T) {
			h, port, err := ParseAuthority(tc.in)
			if tc.rule == "" {
				if err != nil || h.String() != tc.host || port != tc.port {
					t.Fatalf("ParseAuthority(%q) = %q, %d, %v; want %q, %d", tc.in, h, port, err, tc.host, tc.port)
				}
				return
			}
			var he *HostError
			if !errors.As(err, &he) || he.Rule != tc.rule {
				t.Fatalf("ParseAuthority(%q) = %q, %d, %v; want refusal by %s", tc.in, h, port, err, tc.rule)
			}
		})
	}
}

func TestHostErrorNeverEchoesInput(t *testing.T) {
	const secret = "sk-ant-secret-0123456789"
	for _, in := range []string{secret + ".example..com", "[" + secret + "]", secret + "@x:1"} {
		_, _, err := ParseAuthority(in)
		if err == nil {
			t.Fatalf("ParseAuthority(%q) accepted", in)
		}
		if d := Refused(err); strings.Contains(d.Reason, "secret") || strings.Contains(err.Error(), "secret") {
			t.Fatalf("refusal echoes its input: %v / %q", err, d.Reason)
		}
	}
}
