// Package egress is the pure decision core of the net component: it turns what a caller asked
// for (a CONNECT authority or an absolute URL's host) into a normalised Host, refuses IP
// literals in every spelling, classifies resolved addresses against the IANA special-purpose
// registries, and decides per caller whether a host and port are allowed, refused, or to be
// put to the operator (an "ask" host: Decision.Ask, ConnectRequest; the proxy asks through its
// approval gate and then makes every other check as for an allowed host). It names every refusal
// net makes, with the status and text net answers it with (Deny, Status).
//
// It does no I/O. What it does not guarantee: that a name resolves to an address that is safe
// to dial (the proxy must resolve, check every address with Pick on every request, and dial
// exactly the address Pick returns), that the TLS server name inside a tunnel matches the host (the proxy peeks the
// ClientHello), or that an allowed host cannot be used to carry data out: a preset or a host
// that accepts writes (a storage bucket, a code host's API) is an exfiltration channel as wide
// as that service.
package egress

import (
	"errors"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Rule names of host and authority refusals, as they appear in Decision.Rule and HostError.Rule.
const (
	RuleIPLiteral    = "ip-literal"    // an IP address in any spelling
	RuleNumericHost  = "numeric-host"  // a name whose last label is a number
	RuleInvalidHost  = "invalid-host"  // not a valid DNS host name after IDNA processing
	RuleBadAuthority = "bad-authority" // not host:port
)

// maxHost is the longest DNS name in text form without the trailing dot (RFC 1035 §2.3.4).
const maxHost = 253

// Host is a normalised DNS host name: IDNA A-labels, lower case, no trailing dot, never an IP
// address. The zero Host is invalid and Decide refuses it.
type Host struct{ name string }

// String returns the host name.
func (h Host) String() string { return h.name }

// IsZero reports whether h is the invalid zero Host.
func (h Host) IsZero() bool { return h.name == "" }

// HostError says why a host or an authority was refused. Msg is a public sentence; it never
// repeats the input.
type HostError struct {
	Rule string
	Msg  string
}

func (e *HostError) Error() string { return e.Rule + ": " + e.Msg }

func hostErr(rule, msg string) *HostError { return &HostError{Rule: rule, Msg: msg} }

// NormalizeHost turns s into a Host or refuses it. IP literals are refused in every spelling a
// resolver or a URL parser might accept: dotted quads, inet_aton's decimal, octal, hex and
// short forms (2130706433, 0177.0.0.1, 0x7f.1, 127.1), IPv6 with or without brackets and with
// embedded IPv4, and any name whose last label is numeric (WHATWG URL treats those as IPv4;
// no top-level domain is numeric). The check runs before and after IDNA mapping, because
// UTS #46 maps full-width digits and dots to ASCII.
func NormalizeHost(s string) (Host, error) {
	if s == "" || len(s) > 4*maxHost {
		return Host{}, hostErr(RuleInvalidHost, "host name is empty or too long")
	}
	if strings.HasPrefix(s, "[") {
		return Host{}, hostErr(RuleIPLiteral, "bracketed IP literals are refused (IPv6 and IPv4-embedded IPv6 included)")
	}
	if strings.ContainsRune(s, ':') {
		if _, err := netip.ParseAddr(s); err == nil {
			return Host{}, hostErr(RuleIPLiteral, "IPv6 address literals are refused (IPv4-embedded included)")
		}
		return Host{}, hostErr(RuleInvalidHost, "a host name cannot contain a colon")
	}
	if err := numeric(strings.TrimSuffix(s, ".")); err != nil {
		return Host{}, err
	}
	if !utf8.ValidString(s) {
		return Host{}, hostErr(RuleInvalidHost, "host name is not valid UTF-8")
	}
	a, err := idna.Lookup.ToASCII(s)
	if err == nil {
		// The A-labels must themselves be valid, so that normalising is idempotent.
		var again string
		again, err = idna.Lookup.ToASCII(a)
		if err == nil && again != a {
			err = errors.New("idna: not stable")
		}
	}
	if err != nil {
		return Host{}, hostErr(RuleInvalidHost, "not a valid host name under IDNA (UTS #46 lookup)")
	}
	a = strings.TrimSuffix(strings.ToLower(a), ".")
	if err := numeric(a); err != nil {
		return Host{}, err
	}
	if err := ldh(a); err != nil {
		return Host{}, err
	}
	return Host{name: a}, nil
}

// numeric refuses IP literals and numeric names.
func numeric(s string) error {
	if s == "" {
		return nil // ldh refuses it with a better message
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return hostErr(RuleIPLiteral, "IP address literals are refused; name the host")
	}
	labels := strings.Split(s, ".")
	all := true
	for _, l := range labels {
		all = all && numLabel(l)
	}
	if all && len(labels) <= 4 {
		return hostErr(RuleIPLiteral, "IPv4 address in inet_aton form (decimal, octal, hex or short) is refused; name the host")
	}
	if numLabel(labels[len(labels)-1]) {
		return hostErr(RuleNumericHost, "a host name whose last label is numeric is refused (clients parse it as an IPv4 address)")
	}
	return nil
}

// numLabel reports whether l is a number as inet_aton or a WHATWG URL parser reads one:
// decimal or octal digits, or 0x followed by hex digits (possibly none).
func numLabel(l string) bool {
	if l == "" {
		return false
	}
	digits := "0123456789"
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		l, digits = l[2:], "0123456789abcdefABCDEF"
	}
	for i := 0; i < len(l); i++ {
		if !strings.ContainsRune(digits, rune(l[i])) {
			return false
		}
	}
	return true
}

// ldh checks the letters-digits-hyphen rule and the DNS length limits (RFC 1123 §2.1).
func ldh(s string) error {
	if s == "" || len(s) > maxHost {
		return hostErr(RuleInvalidHost, "host name is empty or longer than 253 characters")
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return hostErr(RuleInvalidHost, "host name has an empty label or one longer than 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return hostErr(RuleInvalidHost, "a host name label starts or ends with a hyphen")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return hostErr(RuleInvalidHost, "host name has a character outside letters, digits and hyphen")
			}
		}
	}
	return nil
}

// ParseAuthority parses a CONNECT request target, host:port (RFC 9110 §9.3.6), strictly:
// the port is required, decimal, 1-65535, without sign or leading zeros; the host must pass
// NormalizeHost, so IP literals (bracketed IPv6 included) are refused.
func ParseAuthority(s string) (Host, uint16, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Host{}, 0, hostErr(RuleBadAuthority, "authority must be host:port")
	}
	port, ok := parsePort(s[i+1:])
	if !ok {
		return Host{}, 0, hostErr(RuleBadAuthority, "port must be a decimal number from 1 to 65535 without leading zeros")
	}
	if s[:i] == "" {
		return Host{}, 0, hostErr(RuleBadAuthority, "authority has no host")
	}
	h, err := NormalizeHost(s[:i])
	if err != nil {
		return Host{}, 0, err
	}
	return h, port, nil
}

func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return uint16(n), n <= 65535
}
