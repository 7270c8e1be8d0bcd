package egress

import (
	"cmp"
	"strings"
)

// Rule names of the refusals net makes around Decide: of a request head (images/net/relay), of
// the proxy's own limits, and of a tunnel's first bytes.
const (
	RuleNoCaller      = "no-caller"            // the connection's source is no caller net knows
	RuleRateLimit     = "rate-limit"           // the caller is over its flood brake
	RuleNotProxy      = "not-proxy-request"    // neither CONNECT nor an absolute URL
	RuleScheme        = "scheme-not-supported" // an absolute URL that is not http://
	RuleTunnelLimit   = "tunnel-limit"         // net holds its maximum of open tunnels
	RuleConnLimit     = "conn-limit"           // the caller, or net in all, holds its maximum of open connections
	RuleBodyTooLarge  = "body-too-large"       // a forwarded body over the limit
	RuleCLTEConflict  = "cl-te-conflict"       // Content-Length and Transfer-Encoding (request smuggling)
	RuleHeaderTooBig  = "header-too-large"     // a request head over the limit
	RuleHeaderTimeout = "header-timeout"       // a request head too slow
	RuleMalformed     = "malformed-request"    // not HTTP/1.1
	RuleSNIMissing    = "sni-missing"          // a tunnel that does not start with a ClientHello naming a host
	RuleSNIMismatch   = "sni-mismatch"         // a ClientHello naming another host (domain fronting)
	RuleTLSHandshake  = "tls-handshake"        // a failed mTLS handshake
	RuleAudit         = "audit-unavailable"    // net's audit log takes no more lines (a full or read-only volume)
)

// refusals is net's one table of refusals, by rule: the HTTP status net answers with, and the
// sentence the caller is told when the refusal site has nothing more specific to say. What
// cannot be read as a request is 400, a policy decision 403. The tunnel's and the handshake's
// refusals are never answered (the caller has its 200 already, or speaks no HTTP yet): net
// closes the connection, and their status is what an answer would have been. The statuses are
// numbers: egress imports no net/http (TestPure).
var refusals = map[string]struct {
	status int
	text   string
}{
	RuleNoRules:        {403, "net has no rules, so every destination is refused"},
	RuleDenyHost:       {403, "the host matches a deny_hosts entry"},
	RuleNoCallerRule:   {403, "the caller has no net rule"},
	RuleHostNotAllowed: {403, "the caller may not reach the host"},
	RulePortNotAllowed: {403, "the caller may not reach the host on that port"},
	RuleSpecialRange:   {403, "the host resolves to an address in a special-purpose range"},
	RuleAsk:            {403, "the host needs the operator's approval"},
	RuleIPLiteral:      {403, "IP address literals are refused; name the host"},
	RuleNumericHost:    {403, "a host name whose last label is numeric is refused (clients parse it as an IPv4 address)"},
	RuleInvalidHost:    {400, "the host could not be parsed"},
	RuleBadAuthority:   {400, "authority must be host:port"},
	RuleNoCaller:       {403, "the connection's source is no known caller"},
	RuleRateLimit:      {429, "too many requests from this caller; retry later"},
	RuleNotProxy:       {400, "net serves CONNECT and absolute http:// URLs only"},
	RuleScheme:         {400, "only http:// URLs are forwarded; use CONNECT for https"},
	RuleTunnelLimit:    {503, "net holds its maximum of open tunnels; retry later"},
	RuleConnLimit:      {503, "net holds its maximum of open connections; retry later"},
	RuleBodyTooLarge:   {413, "the request body is too large"},
	RuleCLTEConflict:   {400, "a request with both Content-Length and Transfer-Encoding is refused"},
	RuleHeaderTooBig:   {431, "the request head is too large"},
	RuleHeaderTimeout:  {408, "the request head did not arrive in time"},
	RuleMalformed:      {400, "the request could not be parsed as HTTP/1.1"},
	RuleSNIMissing:     {403, "the tunnel did not start with a TLS ClientHello naming the host"},
	RuleSNIMismatch:    {403, "the TLS server name differs from the CONNECT host (domain fronting)"},
	RuleTLSHandshake:   {403, "the mTLS handshake failed"},
	RuleAudit:          {503, "net cannot write its audit log, so it decides nothing: free net's audit volume and restart net"},
}

// Deny is the refusal naming rule, with reason, one public sentence; "" is the rule's own text.
func Deny(rule, reason string) Decision {
	return Decision{Rule: rule, Reason: cmp.Or(reason, refusals[rule].text)}
}

// Status is the HTTP status of a refusal naming rule; a special-range refusal's is its
// prefix's. A rule not in the table is the approval gate's reason, which images/net/approval
// passes on (approval_denied, approval_timeout, ...): 403, like every policy decision.
func Status(rule string) int {
	if r, ok := refusals[strings.SplitN(rule, ":", 2)[0]]; ok {
		return r.status
	}
	return 403
}
