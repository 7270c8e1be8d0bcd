package compile

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/landlock"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// The ports components listen on inside the stack (docs/architecture.md, "The wall" and "The
// model path and custody"). The compose renderer names them in the URLs it hands each
// component; the Landlock domain allows exactly them.
const (
	ProxyPort     = 3128 // net's plain proxy, on its callers' edges
	MTLSProxyPort = 3129 // net's mutual-TLS proxy and metrics, for callers known by SPIFFE ID
	LLMPort       = 8080 // llm's Messages API, on the agent's edge
	KMSPort       = 8443 // kms, mutual TLS only
	BashPort      = 8090 // bash's MCP server, on the agent's edge
	FSPort        = 8091 // fs's API and MCP server, on the agent's edge
)

// Ports are the TCP ports each kind listens on. The launcher serves Unix sockets only; an app
// serves nothing.
var Ports = map[pbp.Kind][]uint16{
	pbp.KindNet: {ProxyPort, MTLSProxyPort}, pbp.KindLLM: {LLMPort}, pbp.KindKMS: {KMSPort},
	pbp.KindBash: {BashPort}, pbp.KindFS: {FSPort},
}

// withLandlock records the component's Landlock domain as an annotation, for the runtime shim to
// apply (policies/landlock). It runs after the mounts and annotations are made: the writable
// mounts are the domain's only writable places.
func withLandlock(m *pbp.Manifest, c *pbp.Component) SpecOpt {
	return func(s *specs.Spec) error {
		d := landlock.Domain{Mode: c.Landlock}
		if c.Landlock != landlock.PerCommand {
			d.Exec, d.Write = slices.Clone(c.Exec), writableMounts(s.Mounts)
			d.Bind = slices.Clone(Ports[c.Kind])
			// Its own ports too: a healthcheck dials the component's own listener.
			d.Connect = append(slices.Clone(Ports[c.Kind]), landlock.DNSPort)
			for _, to := range c.ConnectTo {
				if peer := m.Component(to); peer != nil {
					d.Connect = append(d.Connect, Ports[peer.Kind]...)
				}
			}
			d.AnyConnect = c.Egress
		}
		s.Annotations[landlock.Annotation] = d.Encode()
		return nil
	}
}

// writableMounts are the destinations of the spec's writable mounts, less the kernel's and the
// device file systems (their few writable files are landlock.Devices).
func writableMounts(ms []specs.Mount) []string {
	var out []string
	for _, m := range ms {
		switch {
		case slices.Contains(m.Options, "ro"):
		case m.Type == "proc" || m.Type == "sysfs" || m.Type == "cgroup" || m.Type == "mqueue" || m.Type == "devpts":
		case m.Destination == "/dev":
		default:
			out = append(out, m.Destination)
		}
	}
	return out
}
