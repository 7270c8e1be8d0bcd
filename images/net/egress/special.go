package egress

import "net/netip"

// specials lists the address blocks net never dials, most specific first so the name a refusal
// carries is the most telling one. Sources, as of 2025:
//   - IANA IPv4 Special-Purpose Address Registry,
//     https://www.iana.org/assignments/iana-ipv4-special-registry/ (RFC 6890 and updates);
//   - IANA IPv6 Special-Purpose Address Registry,
//     https://www.iana.org/assignments/iana-ipv6-special-registry/;
//   - IANA IPv4 Address Space (224/4 multicast, 240/4 reserved) and IANA IPv6 Address Space
//     (only 2000::/3 is allocated as global unicast: everything else is refused below).
//
// The registries mark a few of these blocks "globally reachable" (192.0.0.9/32, 192.0.0.10/32,
// 192.31.196.0/24, 192.52.193.0/24, 192.175.48.0/24, 2001:1::1/128, 2001:1::2/128,
// 2001:3::/32, 2001:4:112::/48, 2001:20::/28, 2620:4f:8000::/48): anycast and AS112 services
// an egress proxy has no reason to reach, so they are refused too. Go's IsGlobalUnicast is not
// used: it calls 0.1.2.3, 240.0.0.1, 198.18.0.1 and 192.0.0.8 global (docs/pitfalls.md).
var specials = []struct {
	prefix netip.Prefix
	name   string
}{
	// Cloud metadata services first, so the log names them.
	{pfx("169.254.169.254/32"), "cloud-metadata"},      // AWS, GCP, Azure, OCI, DigitalOcean
	{pfx("100.100.100.200/32"), "cloud-metadata"},      // Alibaba Cloud
	{pfx("fd00:ec2::254/128"), "cloud-metadata"},       // AWS IMDS over IPv6
	{pfx("0.0.0.0/8"), "this-network"},                 // RFC 791
	{pfx("10.0.0.0/8"), "private-use"},                 // RFC 1918
	{pfx("100.64.0.0/10"), "shared-address-space"},     // RFC 6598 (CGNAT)
	{pfx("127.0.0.0/8"), "loopback"},                   // RFC 1122
	{pfx("169.254.0.0/16"), "link-local"},              // RFC 3927
	{pfx("172.16.0.0/12"), "private-use"},              // RFC 1918
	{pfx("192.0.0.0/24"), "ietf-protocol-assignments"}, // RFC 6890
	{pfx("192.0.2.0/24"), "documentation"},             // RFC 5737 TEST-NET-1
	{pfx("192.31.196.0/24"), "as112"},                  // RFC 7535
	{pfx("192.52.193.0/24"), "amt"},                    // RFC 7450
	{pfx("192.88.99.0/24"), "6to4-relay-anycast"},      // RFC 7526 (deprecated)
	{pfx("192.168.0.0/16"), "private-use"},             // RFC 1918
	{pfx("192.175.48.0/24"), "as112"},                  // RFC 7534
	{pfx("198.18.0.0/15"), "benchmarking"},             // RFC 2544
	{pfx("198.51.100.0/24"), "documentation"},          // RFC 5737 TEST-NET-2
	{pfx("203.0.113.0/24"), "documentation"},           // RFC 5737 TEST-NET-3
	{pfx("224.0.0.0/4"), "multicast"},                  // RFC 5771
	{pfx("255.255.255.255/32"), "limited-broadcast"},   // RFC 919
	{pfx("240.0.0.0/4"), "reserved"},                   // RFC 1112
	{pfx("::/128"), "unspecified"},                     // RFC 4291
	{pfx("::1/128"), "loopback"},                       // RFC 4291
	{pfx("::ffff:0:0/96"), "ipv4-mapped"},              // RFC 4291
	{pfx("::/96"), "ipv4-compatible"},                  // RFC 4291 §2.5.5.1 (deprecated)
	{pfx("64:ff9b::/96"), "nat64"},                     // RFC 6052: embeds an IPv4 address
	{pfx("64:ff9b:1::/48"), "nat64-local"},             // RFC 8215
	{pfx("100::/64"), "discard-only"},                  // RFC 6666
	{pfx("100:0:0:1::/64"), "dummy-prefix"},            // RFC 9780
	{pfx("2001::/32"), "teredo"},                       // RFC 4380: embeds an IPv4 address
	{pfx("2001::/23"), "ietf-protocol-assignments"},    // RFC 2928
	{pfx("2001:db8::/32"), "documentation"},            // RFC 3849
	{pfx("2002::/16"), "6to4"},                         // RFC 3056: embeds an IPv4 address
	{pfx("2620:4f:8000::/48"), "as112"},                // RFC 7534
	{pfx("3fff::/20"), "documentation"},                // RFC 9637
	{pfx("5f00::/16"), "srv6-sids"},                    // RFC 9602
	{pfx("fc00::/7"), "unique-local"},                  // RFC 4193
	{pfx("fe80::/10"), "link-local"},                   // RFC 4291
	{pfx("fec0::/10"), "site-local"},                   // RFC 3879 (deprecated)
	{pfx("ff00::/8"), "multicast"},                     // RFC 4291
}

// globalUnicast6 is the only IPv6 block IANA allocates for global unicast.
var globalUnicast6 = pfx("2000::/3")

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Special reports whether addr lies in a special-purpose block and names it. An invalid
// address is special ("invalid"); a zone is ignored. IPv4-mapped IPv6 addresses are special
// as such: a caller that wants to treat ::ffff:a.b.c.d as a.b.c.d must Unmap first.
func Special(addr netip.Addr) (string, bool) {
	if !addr.IsValid() {
		return "invalid", true
	}
	addr = addr.WithZone("")
	for _, s := range specials {
		if s.prefix.Contains(addr) {
			return s.name, true
		}
	}
	if addr.Is6() && !globalUnicast6.Contains(addr) {
		return "ipv6-not-global-unicast", true
	}
	return "", false
}

// Pick checks every address a name resolved to and returns the one to dial: the first IPv4
// address, else the first. One special address refuses the name, whichever would be dialled:
// the answer is the resolver's to choose, and a name that mixes public and private addresses
// is a rebinding attempt. An IPv4-mapped address counts as its IPv4 address (Go returns
// /etc/hosts IPv4 entries mapped). exempt, when not nil, names special addresses a test world
// may use. No address is a refusal too.
func Pick(addrs []netip.Addr, exempt func(netip.Addr) bool) (netip.Addr, Decision) {
	var pick netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if name, special := Special(a); special && (exempt == nil || !exempt(a)) {
			return netip.Addr{}, RefuseSpecial(name)
		}
		if !pick.IsValid() || a.Is4() && !pick.Is4() {
			pick = a
		}
	}
	if !pick.IsValid() {
		return pick, deny(RuleSpecialRange+":invalid", "the host resolved to no address")
	}
	return pick, Decision{Allow: true}
}
