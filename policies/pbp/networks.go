package pbp

import "sort"

// EgressNetwork is the one network that reaches outside the machine; only a component with
// egress (net) joins it.
const EgressNetwork = "egress"

// EdgeNetwork is the name of the internal network an edge is: its two ends join it, nothing else.
func EdgeNetwork(e Edge) string { return "edge-" + e.From + "-" + e.To }

// Networks are the networks c joins, by the names the compose file gives them (without the
// project's prefix), sorted: one per edge c is an end of, and the egress network if c has egress.
// The compose renderer attaches exactly these and the compiler writes them into c's spec, where
// the runtime shim holds a container to them (docs/architecture.md, "The runtime shim").
func (m *Manifest) Networks(c *Component) []string {
	var out []string
	for _, e := range m.Edges {
		if e.From == c.Name || e.To == c.Name {
			out = append(out, EdgeNetwork(e))
		}
	}
	if c.Egress {
		out = append(out, EgressNetwork)
	}
	sort.Strings(out)
	return out
}
