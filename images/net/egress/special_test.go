package egress

import (
	"net/netip"
	"testing"
)

func TestSpecial(t *testing.T) {
	for _, tc := range []struct {
		addr, want string // want "" means dialable
		goGlobal   bool   // Go's IsGlobalUnicast says true: the pitfall this row guards
	}{
		// docs/pitfalls.md: Go calls these global unicast.
		{"0.1.2.3", "this-network", true},
		{"240.0.0.1", "reserved", true},
		{"198.18.0.1", "benchmarking", true},
		{"192.0.0.8", "ietf-protocol-assignments", true},
		{"::127.0.0.1", "ipv4-compatible", true},
		// The rest of the IPv4 registry.
		{"0.0.0.0", "this-network", false},
		{"10.1.2.3", "private-use", true},
		{"172.16.0.1", "private-use", true},
		{"172.31.255.255", "private-use", true},
		{"192.168.1.1", "private-use", true},
		{"100.64.0.1", "shared-address-space", true},
		{"100.127.255.255", "shared-address-space", true},
		{"100.100.100.200", "cloud-metadata", true},
		{"127.0.0.1", "loopback", false},
		{"127.255.255.254", "loopback", false},
		{"169.254.169.254", "cloud-metadata", false},
		{"169.254.1.1", "link-local", false},
		{"192.0.0.9", "ietf-protocol-assignments", true},
		{"192.0.2.1", "documentation", true},
		{"192.31.196.1", "as112", true},
		{"192.52.193.1", "amt", true},
		{"192.88.99.1", "6to4-relay-anycast", true},
		{"192.175.48.1", "as112", true},
		{"198.19.255.255", "benchmarking", true},
		{"198.51.100.1", "documentation", true},
		{"203.0.113.1", "documentation", true},
		{"224.0.0.1", "multicast", false},
		{"239.255.255.250", "multicast", false},
		{"255.255.255.255", "limited-broadcast", false},
		{"250.1.2.3", "reserved", true},
		// IPv6.
		{"::", "unspecified", false},
		{"::1", "loopback", false},
		{"::ffff:127.0.0.1", "ipv4-mapped", false},
		{"::ffff:8.8.8.8", "ipv4-mapped", true},
		{"64:ff9b::7f00:1", "nat64", true},
		{"64:ff9b:1::1", "nat64-local", true},
		{"100::1", "discard-only", true},
		{"100:0:0:1::1", "dummy-prefix", true},
		{"2001::1", "teredo", true},
		{"2001:1::1", "ietf-protocol-assignments", true},
		{"2001:2::1", "ietf-protocol-assignments", true},
		{"2001:1ff::1", "ietf-protocol-assignments", true},
		{"2001:db8::1", "documentation", true},
		{"2002:7f00:1::1", "6to4", true},
		{"2620:4f:8000::1", "as112", true},
		{"3fff::1", "documentation", true},
		{"5f00::1", "srv6-sids", true},
		{"fc00::1", "unique-local", true},
		{"fd00:ec2::254", "cloud-metadata", true},
		{"fd12:3456::1", "unique-local", true},
		{"fe80::1", "link-local", false},
		{"fe80::1%eth0", "link-local", false},
		{"fec0::1", "site-local", true},
		{"ff02::1", "multicast", false},
		{"1::1", "ipv6-not-global-unicast", true},
		{"4000::1", "ipv6-not-global-unicast", true},
		// Dialable.
		{"8.8.8.8", "", true},
		{"1.1.1.1", "", true},
		{"100.63.255.255", "", true},
		{"100.128.0.0", "", true},
		{"172.15.255.255", "", true},
		{"172.32.0.0", "", true},
		{"198.17.255.255", "", true},
		{"198.20.0.0", "", true},
		{"223.255.255.255", "", true},
		{"2001:200::1", "", true},
		{"2001:4860:4860::8888", "", true},
		{"2606:4700::1111", "", true},
		{"2a00:1450:4001:82b::2011", "", true},
	} {
		a := netip.MustParseAddr(tc.addr)
		got, special := Special(a)
		if got != tc.want || special != (tc.want != "") {
			t.Errorf("Special(%s) = %q, %v; want %q", tc.addr, got, special, tc.want)
		}
		if a.IsGlobalUnicast() != tc.goGlobal {
			t.Errorf("%s: IsGlobalUnicast = %v; the table says %v (update the goGlobal column)", tc.addr, a.IsGlobalUnicast(), tc.goGlobal)
		}
	}
	if name, special := Special(netip.Addr{}); !special || name != "invalid" {
		t.Errorf("Special(zero) = %q, %v; want invalid", name, special)
	}
}

// TestSpecialCoversEveryRange checks each table entry's first and last address, so an entry
// shadowed by a wrong order or a typo in a prefix shows up.
func TestSpecialCoversEveryRange(t *testing.T) {
	for _, s := range specials {
		first := s.prefix.Masked().Addr()
		last := first
		for i := s.prefix.Bits(); i < first.BitLen(); i++ {
			last = setBit(last, i)
		}
		for _, a := range []netip.Addr{first, last} {
			if _, special := Special(a); !special {
				t.Errorf("%s (in %s) is not special", a, s.prefix)
			}
		}
	}
}

func setBit(a netip.Addr, i int) netip.Addr {
	if a.Is4() {
		b := a.As4()
		b[i/8] |= 0x80 >> (i % 8)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	b[i/8] |= 0x80 >> (i % 8)
	return netip.AddrFrom16(b)
}

func TestPick(t *testing.T) {
	exempt := func(a netip.Addr) bool { return a == netip.MustParseAddr("10.9.9.9") }
	for _, tc := range []struct {
		name   string
		addrs  []string
		exempt func(netip.Addr) bool
		want   string // the address picked, or "" for a refusal
		rule   string
	}{
		{"one public", []string{"8.8.8.8"}, nil, "8.8.8.8", ""},
		{"IPv4 first", []string{"2001:4860::8888", "8.8.4.4", "8.8.8.8"}, nil, "8.8.4.4", ""},
		{"only IPv6", []string{"2001:4860::8888", "2001:4860::8844"}, nil, "2001:4860::8888", ""},
		{"mapped counts as IPv4", []string{"2001:4860::8888", "::ffff:8.8.8.8"}, nil, "8.8.8.8", ""},
		{"private", []string{"10.0.0.1"}, nil, "", "special-range:private-use"},
		{"mapped private", []string{"::ffff:10.0.0.1"}, nil, "", "special-range:private-use"},
		{"one special among public", []string{"8.8.8.8", "169.254.169.254"}, nil, "", "special-range:cloud-metadata"},
		{"special not picked still refuses", []string{"8.8.8.8", "fc00::1"}, nil, "", "special-range:unique-local"},
		{"exempt", []string{"10.9.9.9"}, exempt, "10.9.9.9", ""},
		{"exempt and another special", []string{"10.9.9.9", "10.9.9.8"}, exempt, "", "special-range:private-use"},
		{"invalid", []string{""}, nil, "", "special-range:invalid"},
		{"none", nil, nil, "", "special-range:invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, s := range tc.addrs {
				a, _ := netip.ParseAddr(s)
				addrs = append(addrs, a)
			}
			got, d := Pick(addrs, tc.exempt)
			if d.Allow != (tc.want != "") || d.Rule != tc.rule || tc.want != "" && got != netip.MustParseAddr(tc.want) {
				t.Fatalf("got %v %+v; want %q %q", got, d, tc.want, tc.rule)
			}
		})
	}
}
