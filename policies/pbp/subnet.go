package pbp

import (
	"fmt"
	"net/netip"
)

// EdgePool is the address range the edges' internal networks are carved from, one /24 per edge
// in the order of Manifest.Edges. Fixing the addresses in the policy lets net tell its callers
// apart by source address: each edge network has exactly two members, net and its caller.
// A host that already routes this range must not run the stack (doctor checks it).
var EdgePool = netip.MustParsePrefix("10.213.0.0/16")

// EdgeSubnet returns the subnet of m's i-th edge.
func (m *Manifest) EdgeSubnet(i int) (netip.Prefix, error) {
	if i < 0 || i >= len(m.Edges) || i > 255 {
		return netip.Prefix{}, fmt.Errorf("edge %d: no subnet (the pool holds 256 edges; the manifest has %d)", i, len(m.Edges))
	}
	b := EdgePool.Addr().As4()
	b[2] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24), nil
}

// EdgeOf returns the edge whose subnet holds addr.
func (m *Manifest) EdgeOf(addr netip.Addr) (Edge, bool) {
	addr = addr.Unmap()
	for i, e := range m.Edges {
		if s, err := m.EdgeSubnet(i); err == nil && s.Contains(addr) {
			return e, true
		}
	}
	return Edge{}, false
}
