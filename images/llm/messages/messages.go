// Package messages is llm's reading of Anthropic Messages API traffic: it parses request bodies
// strictly, decides whether a request may go to the model provider under the policy's
// business.llm rules, runs the secret filter over what the agent sends, hashes tool lists for
// pinning, relays server-sent event streams and reads token usage. It is pure: no network, no
// logging; images/llm does the I/O.
//
// What it does not guarantee: that a request passing every check is harmless. The secret filter
// sees text, not intent: an agent that encodes a secret it knows (base64, spelled backwards,
// split across turns) gets it past any filter. Assistant turns, tool_use inputs and base64
// images and documents are not scanned (see Secrets). Usage figures are the upstream's own.
package messages

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// Rules are a composed policy's business.llm block, checked and compiled for decisions.
type Rules struct {
	upstream    *url.URL
	models      set
	maxTokens   int64
	budget      int64
	redact      bool
	betas       set
	serverTools set
	mcpServers  set
	extraFields set
	tools       set
	keySecret   string
	keyCache    time.Duration
	filterRules []pbp.FilterRule
}

type set map[string]bool

func newSet(p *[]string) set {
	s := set{}
	if p != nil {
		for _, v := range *p {
			s[v] = true
		}
	}
	return s
}

// Compile checks r and returns the rules llm decides with. It refuses (so llm refuses to start)
// unless upstream, models, max_tokens, session_token_budget and key_secret are set; an unset
// allowlist allows nothing.
func Compile(r *pbp.LLMRules) (*Rules, error) {
	if r == nil {
		return nil, errors.New("business.llm is not set")
	}
	u, err := url.Parse(r.Upstream)
	switch {
	case r.Upstream == "":
		return nil, errors.New("business.llm.upstream is not set")
	case err != nil:
		return nil, fmt.Errorf("business.llm.upstream: %w", err)
	// Only https: the key travels in the request, and net's tunnel is opaque to it.
	case u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("business.llm.upstream %q: want https://host[:port] and nothing else", r.Upstream)
	case r.Models == nil || len(*r.Models) == 0:
		return nil, errors.New("business.llm.models is not set")
	case r.MaxTokens == nil || *r.MaxTokens <= 0:
		return nil, errors.New("business.llm.max_tokens is not set (or not positive)")
	case r.Budget == nil || *r.Budget <= 0:
		return nil, errors.New("business.llm.session_token_budget is not set (or not positive)")
	case r.KeySecret == "":
		return nil, errors.New("business.llm.key_secret is not set")
	case r.OnSecret != "" && r.OnSecret != "refuse" && r.OnSecret != "redact":
		return nil, fmt.Errorf("business.llm.on_secret %q: want refuse or redact", r.OnSecret)
	case r.KeyCacheSeconds != nil && *r.KeyCacheSeconds < 0:
		return nil, errors.New("business.llm.key_cache_seconds is negative")
	}
	u.Path = ""
	rules := &Rules{
		upstream: u, models: newSet(r.Models), maxTokens: int64(*r.MaxTokens), budget: int64(*r.Budget),
		redact: r.OnSecret == "redact", betas: newSet(r.Betas), serverTools: newSet(r.ServerTools),
		mcpServers: newSet(r.MCPServers), extraFields: newSet(r.ExtraFields), tools: newSet(r.Tools),
		keySecret: r.KeySecret, filterRules: r.FilterRules,
	}
	if r.KeyCacheSeconds != nil {
		rules.keyCache = time.Duration(*r.KeyCacheSeconds) * time.Second
	}
	return rules, nil
}

// Upstream is the provider's base URL, https://host[:port].
func (r *Rules) Upstream() *url.URL { u := *r.upstream; return &u }

// Budget is the session's token budget: input, cache and output tokens together.
func (r *Rules) Budget() int64 { return r.budget }

// KeySecret names the sealed secret kms opens for the API key.
func (r *Rules) KeySecret() string { return r.keySecret }

// KeyCache is how long an opened key may be kept; 0 means ask kms for every request.
func (r *Rules) KeyCache() time.Duration { return r.keyCache }

// Redact reports whether on_secret is redact (otherwise a secret refuses the request).
func (r *Rules) Redact() bool { return r.redact }

// FilterRules are the policy's extra secret-filter rules.
func (r *Rules) FilterRules() []pbp.FilterRule { return r.filterRules }

// Reason names why a request was refused. It goes to the agent, the audit line and the
// X-Sharness-Deny header; it never carries request content.
type Reason string

// The refusals. Each check in this package has its own.
const (
	ReasonBadJSON        Reason = "invalid_json"         // not one strict JSON object
	ReasonBadField       Reason = "invalid_field"        // a known field of the wrong type or shape
	ReasonUnknownField   Reason = "unknown_field"        // a top-level field neither known nor in extra_fields
	ReasonModel          Reason = "model_not_allowed"    // model missing or not in models
	ReasonMaxTokens      Reason = "max_tokens"           // missing, not positive, or above the cap
	ReasonBeta           Reason = "beta_not_allowed"     // an anthropic-beta value not in betas
	ReasonServerTool     Reason = "server_tool"          // a provider-executed tool type not in server_tools
	ReasonToolsNotPinned Reason = "tools_not_pinned"     // the client tools' hash is not in tools
	ReasonMCPServer      Reason = "mcp_server"           // an mcp_servers URL not in mcp_servers
	ReasonSecret         Reason = "secret"               // the filter found a secret and on_secret is refuse
	ReasonBudget         Reason = "budget_spent"         // the session token budget is spent
	ReasonTooLarge       Reason = "too_large"            // body above the cap
	ReasonNotFound       Reason = "not_found"            // no such endpoint
	ReasonKey            Reason = "key_unavailable"      // kms could not give the key
	ReasonUpstream       Reason = "upstream_unreachable" // the provider could not be reached
	ReasonAudit          Reason = "audit_unavailable"    // llm's audit log takes no more lines (a full or read-only volume)
	ReasonBusy           Reason = "overloaded"           // the request bodies llm holds at once are at their budget
)

// Refusal is a request llm will not forward, with what the agent is told. Its Message must
// never contain request content or a key.
type Refusal struct {
	Reason  Reason
	Status  int    // HTTP status
	Type    string // Anthropic error type
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// refusals is llm's one table of refusals: each reason's HTTP status and Anthropic error type,
// and the text the agent is told when the refusal site has nothing more specific to say. Every
// refusal of the request itself, a policy decision or a malformed request, is 400
// invalid_request_error, which no client retries and which Claude Code prints as it is ("API
// Error: 400 llm: …"): measured with Claude Code 2.1.332, a 403 is shown as "Failed to
// authenticate.", a 413 as its own "Request too large (max 32MB)" text and a 404 as a problem
// with the selected model, each hiding the rule (TestClaudeCodeStack/refusal-names-the-rule). The
// SDKs raise a 400 as a bad-request error with the message. An endpoint llm does not serve stays
// 404, a missing key or an unreachable upstream the 5xx a client may retry. What the person can
// do comes last (hints).
var refusals = map[Reason]struct {
	status    int
	typ, text string
}{
	ReasonBadJSON:        {http.StatusBadRequest, "invalid_request_error", "the request body is not a JSON object"},
	ReasonBadField:       {http.StatusBadRequest, "invalid_request_error", "a field of the request has the wrong type or shape"},
	ReasonUnknownField:   {http.StatusBadRequest, "invalid_request_error", "a top-level field is not allowed by the policy (business.llm.extra_fields)"},
	ReasonModel:          {http.StatusBadRequest, "invalid_request_error", "the model is not allowed by the policy (business.llm.models)"},
	ReasonMaxTokens:      {http.StatusBadRequest, "invalid_request_error", "max_tokens is missing, not positive, or above the policy's cap (business.llm.max_tokens)"},
	ReasonBeta:           {http.StatusBadRequest, "invalid_request_error", "an anthropic-beta value is not allowed by the policy (business.llm.betas)"},
	ReasonServerTool:     {http.StatusBadRequest, "invalid_request_error", "a server-side tool type is not allowed by the policy (business.llm.server_tools)"},
	ReasonToolsNotPinned: {http.StatusBadRequest, "invalid_request_error", "the tool list is not pinned by the policy (business.llm.tools)"},
	ReasonMCPServer:      {http.StatusBadRequest, "invalid_request_error", "an MCP server URL is not allowed by the policy (business.llm.mcp_servers)"},
	ReasonSecret:         {http.StatusBadRequest, "invalid_request_error", "the secret filter matched and on_secret is refuse, so nothing was sent"},
	ReasonBudget:         {http.StatusBadRequest, "invalid_request_error", "the session token budget is spent (business.llm.session_token_budget); start a new session"},
	ReasonTooLarge:       {http.StatusBadRequest, "invalid_request_error", "the request body is too large"},
	ReasonNotFound:       {http.StatusNotFound, "not_found_error", "no such endpoint (llm serves POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models)"},
	ReasonKey:            {http.StatusServiceUnavailable, "api_error", "the API key is unavailable"},
	ReasonUpstream:       {http.StatusBadGateway, "api_error", "the model API could not be reached"},
	ReasonAudit:          {http.StatusServiceUnavailable, "api_error", "llm cannot write its audit log, so it forwards nothing"},
	ReasonBusy:           {http.StatusServiceUnavailable, "overloaded_error", "llm holds as many request bodies as its memory allows; retry shortly"},
}

// policyHint is what to do about a policy decision: the policy is the person's, fixed by its
// hash, so neither the agent nor a retry changes it.
const policyHint = "; the policy is fixed by its hash: only the person running SHarness can allow this, with a new policy (sharness-ai explain llm shows the rule)"

// hints says, after the reason, what the person or the agent can do about a refusal.
var hints = map[Reason]string{
	ReasonUnknownField:   policyHint,
	ReasonModel:          policyHint,
	ReasonMaxTokens:      policyHint,
	ReasonBeta:           policyHint,
	ReasonServerTool:     policyHint,
	ReasonToolsNotPinned: policyHint + "; a new client version or MCP tool needs new pins (docs/claude-code.md)",
	ReasonMCPServer:      policyHint,
	ReasonSecret:         "; the conversation holds it now, so retrying sends it again: start a new conversation (or clear this one) without it, and keep the secret out of the files and commands the agent reads",
	ReasonTooLarge:       "; shorten the conversation (compact it, or start a new one)",
	// A kms that restarted has a new identity: the key sealed to the one before cannot be
	// opened (issue 22's fault suite, TestFaults/kms).
	ReasonKey:   "; if kms was restarted, the person must seal the key to it again (sharness-ai kms bundle, then secret seal: docs/operator.md)",
	ReasonAudit: "; the person must free llm's audit volume and restart llm (docs/audit.md)",
}

// Refuse is the refusal for reason, with its status and type from the table. detail is what
// the agent is told, after "llm: "; "" is the reason's own text. The reason's hint follows.
func Refuse(reason Reason, detail string) *Refusal {
	r := refusals[reason]
	return &Refusal{Reason: reason, Status: r.status, Type: r.typ, Message: "llm: " + cmp.Or(detail, r.text) + hints[reason]}
}

// refuse is Refuse with a formatted detail.
func refuse(reason Reason, format string, a ...any) *Refusal {
	return Refuse(reason, fmt.Sprintf(format, a...))
}

// ErrorBody is the Anthropic error JSON for an error type and message: the shape every client
// of the API already parses.
func ErrorBody(typ, message string) []byte {
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error", Error: struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{typ, message}})
	return b
}
