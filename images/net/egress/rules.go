package egress

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// Rule names of Decide's refusals. Special-range refusals are "special-range:<name>" with the
// name Special returns; host refusals use the Rule* constants of host.go, and the proxy's own
// those of refusals.go, whose table says how net answers each.
const (
	RuleNoRules        = "no-rules"
	RuleDenyHost       = "deny-host"
	RuleNoCallerRule   = "no-rule-for-caller"
	RuleHostNotAllowed = "host-not-allowed"
	RulePortNotAllowed = "port-not-allowed"
	RuleSpecialRange   = "special-range"
	// RuleAsk names a host the caller may reach only with the operator's approval: Decide's
	// verdict with Ask set, and the allow that follows an approval.
	RuleAsk = "ask"
)

// Decision is the verdict on one request. The zero Decision is a denial. Rule is a stable name
// for logs, metrics and the X-Sharness-Deny header; Reason is one public sentence.
type Decision struct {
	Allow bool
	// Ask: the host is one of the caller's ask hosts, on one of its ports. Allow stays false:
	// the proxy must put the request to the operator (ConnectRequest), and a caller of Decide
	// that looks at Allow alone refuses it.
	Ask    bool
	Rule   string
	Reason string
}

func deny(rule, format string, args ...any) Decision {
	return Deny(rule, fmt.Sprintf(format, args...))
}

// Refused turns a NormalizeHost or ParseAuthority error into a denial naming its rule.
func Refused(err error) Decision {
	if e, ok := err.(*HostError); ok {
		return Decision{Rule: e.Rule, Reason: e.Msg}
	}
	return Deny(RuleInvalidHost, "")
}

// RefuseSpecial is the denial for an address in a special-purpose block named name.
func RefuseSpecial(name string) Decision {
	return deny(RuleSpecialRange+":"+name, "the host resolves to an address in the %s special-purpose range", name)
}

// pattern is a compiled host pattern: an exact name, or (wildcard) any proper subdomain of name.
type pattern struct {
	name     string
	wildcard bool
}

func (p pattern) match(h string) bool {
	if p.wildcard {
		return len(h) > len(p.name)+1 && strings.HasSuffix(h, p.name) && h[len(h)-len(p.name)-1] == '.'
	}
	return h == p.name
}

func (p pattern) String() string {
	if p.wildcard {
		return "*." + p.name
	}
	return p.name
}

// grant allows the hosts of one pattern on some ports, or with ask only once the operator
// approves; source names the rule that granted it.
type grant struct {
	pat    pattern
	ports  []uint16
	source string
	ask    bool
}

// Rules are the compiled net rules: deny patterns and per-caller grants. Build them with
// Compile; a nil *Rules refuses everything.
type Rules struct {
	deny    []pattern
	callers map[string][]grant
}

// Compile checks and compiles the net component's rules. Host patterns must already be in
// normal form (lower-case A-labels, no trailing dot); a wildcard may not cover a whole ICANN
// public suffix (*.com, *.co.uk); presets must be known. nil rules compile to "deny all".
//
// Ports: a caller's own hosts are allowed on its ports (none listed: none allowed). A preset's
// hosts are allowed on the preset's ports, narrowed to the caller's ports when it lists any.
// A caller's ask hosts are asked about on its ports, whatever else allows them.
func Compile(r *pbp.NetRules) (*Rules, error) {
	out := &Rules{callers: map[string][]grant{}}
	if r == nil {
		return out, nil
	}
	for i, h := range r.DenyHosts {
		p, err := compilePattern(h)
		if err != nil {
			return nil, fmt.Errorf("net rules: deny_hosts[%d]: %w", i, err)
		}
		out.deny = append(out.deny, p)
	}
	if r.Callers == nil {
		return out, nil
	}
	for i, c := range *r.Callers {
		field := fmt.Sprintf("net rules: callers[%d]", i)
		if c.Caller == "" {
			return nil, fmt.Errorf("%s: empty caller name", field)
		}
		if _, dup := out.callers[c.Caller]; dup {
			return nil, fmt.Errorf("%s: caller %q has two rules", field, c.Caller)
		}
		var ports []uint16
		for _, p := range c.Ports {
			if p < 1 || p > 65535 {
				return nil, fmt.Errorf("%s: port %d out of range", field, p)
			}
			ports = append(ports, uint16(p))
		}
		gs := []grant{}
		for _, h := range c.Hosts {
			p, err := compilePattern(h)
			if err != nil {
				return nil, fmt.Errorf("%s: hosts: %w", field, err)
			}
			gs = append(gs, grant{pat: p, ports: ports, source: "hosts"})
		}
		for _, h := range c.Ask {
			p, err := compilePattern(h)
			if err != nil {
				return nil, fmt.Errorf("%s: ask: %w", field, err)
			}
			gs = append(gs, grant{pat: p, ports: ports, source: RuleAsk, ask: true})
		}
		for _, name := range c.Presets {
			ps, ok := presets[name]
			if !ok {
				return nil, fmt.Errorf("%s: unknown preset %q (known: %s)", field, name, strings.Join(Presets(), ", "))
			}
			pp := ps.ports
			if len(ports) > 0 {
				pp = slices.DeleteFunc(slices.Clone(pp), func(p uint16) bool { return !slices.Contains(ports, p) })
			}
			for _, h := range ps.hosts {
				gs = append(gs, grant{pat: pattern{name: h}, ports: pp, source: "preset:" + name})
			}
		}
		out.callers[c.Caller] = gs
	}
	return out, nil
}

func compilePattern(s string) (pattern, error) {
	name, wildcard := strings.CutPrefix(s, "*.")
	h, err := NormalizeHost(name)
	if err != nil {
		return pattern{}, fmt.Errorf("%q: %w", s, err)
	}
	if h.name != name {
		return pattern{}, fmt.Errorf("%q is not in normal form (want %q)", s, h.name)
	}
	if suffix, icann := publicsuffix.PublicSuffix(name); wildcard && icann && suffix == name {
		return pattern{}, fmt.Errorf("%q covers a whole public suffix", s)
	}
	return pattern{name: name, wildcard: wildcard}, nil
}

// HasAsk reports whether any caller has ask hosts: then net needs its approval gate.
func (r *Rules) HasAsk() bool {
	if r == nil {
		return false
	}
	for _, gs := range r.callers {
		if slices.ContainsFunc(gs, func(g grant) bool { return g.ask }) {
			return true
		}
	}
	return false
}

// Decide says whether caller may reach host on port. It is pure; deny_hosts wins over every
// allow; a caller without a rule is refused. A host that matches one of the caller's ask
// patterns is never allowed outright: on the caller's ports the verdict is Ask (the proxy puts
// it to the operator), on another port a refusal. It does not look at addresses: the proxy must
// still resolve the host and refuse special-purpose ranges (Special, RefuseSpecial), also after
// an approval.
func Decide(r *Rules, caller string, host Host, port uint16) Decision {
	switch {
	case r == nil:
		return Deny(RuleNoRules, "")
	case host.IsZero():
		return deny(RuleInvalidHost, "no valid host name was given")
	case port == 0:
		return deny(RulePortNotAllowed, "port 0 is never allowed")
	}
	for _, p := range r.deny {
		if p.match(host.name) {
			return deny(RuleDenyHost, "%s matches the deny_hosts entry %s", host.name, p)
		}
	}
	grants, ok := r.callers[caller]
	if !ok {
		return deny(RuleNoCallerRule, "caller %q has no net rule", caller)
	}
	for _, g := range grants {
		if !g.ask || !g.pat.match(host.name) {
			continue
		}
		if !slices.Contains(g.ports, port) {
			return deny(RulePortNotAllowed, "caller %s may ask to reach %s, but not on port %d", caller, host.name, port)
		}
		return Decision{Ask: true, Rule: RuleAsk,
			Reason: fmt.Sprintf("caller %s may reach %s on port %d only with the operator's approval (ask, %s)", caller, host.name, port, g.pat)}
	}
	hostSeen := false
	for _, g := range grants {
		if g.ask || !g.pat.match(host.name) {
			continue
		}
		hostSeen = true
		if slices.Contains(g.ports, port) {
			return Decision{Allow: true, Rule: g.source,
				Reason: fmt.Sprintf("caller %s may reach %s on port %d (%s, %s)", caller, host.name, port, g.source, g.pat)}
		}
	}
	if hostSeen {
		return deny(RulePortNotAllowed, "caller %s may reach %s, but not on port %d", caller, host.name, port)
	}
	return deny(RuleHostNotAllowed, "caller %s may not reach %s", caller, host.name)
}

// ActionConnect is the approval gate's action for a request to an ask host.
const ActionConnect = "net.connect"

// ConnectRequest is what the operator approves for caller reaching host on port, an ask host:
// canonical, the exact request (JSON with fixed keys in a fixed order; the caller is a
// component name, the host in normal form), and a one-line summary for the person.
func ConnectRequest(caller string, host Host, port uint16) (canonical []byte, summary string) {
	canonical, _ = json.Marshal(struct {
		V      int    `json:"v"`
		Caller string `json:"caller"`
		Host   string `json:"host"`
		Port   uint16 `json:"port"`
	}{1, caller, host.name, port})
	return canonical, fmt.Sprintf("%s connects to %s port %d", caller, host.name, port)
}
