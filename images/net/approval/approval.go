// Package approval puts net's requests to "ask" hosts (business.net.callers[].ask) to the
// operator through net's approval gate (internal/gate, docs/gate.md): images/net/egress decides
// that a request needs a person (Decision.Ask), and an Asker waits for the decision and turns it
// into an allow or a refusal. Only such requests reach it: every other request is decided
// without touching the gate.
//
// A request is approved once (`sharness-ai approve ID`), or with `approve --session` every
// identical request (same caller, host and port) until the approval expires, those waiting at
// that moment included. After an approval, net makes every other check as for an allowed host:
// resolution, special-purpose ranges, the TLS server name.
//
// What it does not guarantee: that the client is still there when the person decides (a client
// that gives up leaves its request waiting until the operator decides or it expires), nor
// anything the gate does not (internal/gate). At most MaxWaiting requests wait at once; more
// are refused with approval_unavailable, so that a flood cannot bury the operator's list.
package approval

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sharness-ai/sharness/images/net/egress"
	"github.com/sharness-ai/sharness/internal/gate"
)

// Tiers: a request to an ask host may be approved for a session (tier once).
var Tiers = map[string]gate.Tier{egress.ActionConnect: gate.Once}

// MaxWaiting bounds the requests that wait for the operator at once.
const MaxWaiting = 32

// Asker asks the operator about requests to ask hosts. A nil Asker, or one without a gate,
// refuses them all with approval_unavailable.
type Asker struct {
	g     *gate.Gate
	stop  <-chan struct{}
	slots chan struct{}
}

// New asks through g (nil: nobody can be asked). A request stops waiting when stop is closed
// (net's shutdown), as when it expires.
func New(g *gate.Gate, stop <-chan struct{}) *Asker {
	return &Asker{g: g, stop: stop, slots: make(chan struct{}, MaxWaiting)}
}

// Open opens the gate of net's component, enforcing the policy with hash policy, from s
// (gate.Settings.Open: without an operator key or gate folder nobody can be asked, which it
// logs as a warning when rules have ask hosts) and returns its Asker.
func Open(s gate.Settings, component, policy string, rules *egress.Rules, stop <-chan struct{}, log *slog.Logger) (*Asker, error) {
	needs := ""
	if rules.HasAsk() {
		needs = "every ask host (business.net.callers[].ask)"
	}
	g, err := s.Open(gate.Config{Component: component, Policy: policy, Tiers: Tiers, Log: log}, needs)
	if err != nil {
		return nil, err
	}
	return New(g, stop), nil
}

// Decide asks the operator about caller reaching host on port, which egress.Decide found to be
// an ask host, and waits for the decision. An approval is an allow (rule ask, the reason naming
// the request); anything else is a refusal whose rule is the gate's reason: approval_denied,
// approval_timeout, approval_unavailable, ...
func (a *Asker) Decide(caller string, host egress.Host, port uint16) egress.Decision {
	if a == nil {
		return refusal(host, port, gate.ReasonUnavailable)
	}
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	default:
		d := refusal(host, port, gate.ReasonUnavailable)
		d.Reason = fmt.Sprintf("%s on port %d needs the operator's approval, and %d requests wait for one already; retry later", host, port, MaxWaiting)
		return d
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	canonical, summary := egress.ConnectRequest(caller, host, port)
	v, _ := a.g.Ask(ctx, egress.ActionConnect, canonical, summary) // the gate logs a refusal's cause
	if !v.Approved() {
		return refusal(host, port, v.Reason())
	}
	return egress.Decision{Allow: true, Rule: egress.RuleAsk,
		Reason: fmt.Sprintf("caller %s may reach %s on port %d: the operator approved it (%s, request %s)", caller, host, port, v.Reason(), v.ID())}
}

func refusal(host egress.Host, port uint16, r gate.Reason) egress.Decision {
	return egress.Deny(string(r), fmt.Sprintf("%s on port %d needs the operator's approval: %s", host, port, r.Text()))
}
