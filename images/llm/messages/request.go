package messages

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// MaxDepth bounds a request body's nesting. Tool input schemas are the deepest part of real
// requests; 128 leaves them room while bounding the work of every walk over the body.
const MaxDepth = 128

// Endpoint is the API operation a body is for; the two take different fields.
type Endpoint int

const (
	Create      Endpoint = iota // POST /v1/messages
	CountTokens                 // POST /v1/messages/count_tokens
)

// known are the top-level fields of a Messages request (anthropic-sdk-go v1.84.0
// MessageNewParams, plus stream, and the beta mcp_servers and context_management, which the
// betas allowlist gates upstream). Any other field is refused unless the policy names it in
// extra_fields: a field llm does not know is a field llm cannot check (for example "fallbacks",
// which names other models).
var known = set{
	"model": true, "messages": true, "max_tokens": true, "system": true, "metadata": true,
	"stop_sequences": true, "stream": true, "temperature": true, "top_k": true, "top_p": true,
	"tools": true, "tool_choice": true, "thinking": true, "service_tier": true,
	"mcp_servers": true, "container": true, "context_management": true, "inference_geo": true,
	"speed": true, "cache_control": true, "diagnostics": true, "output_config": true,
}

// Request is a parsed request body. The zero value is not a valid request: use Parse.
type Request struct {
	Model     string
	Stream    bool
	MaxTokens int64    // 0 when absent
	Tools     []string // every tool's name (or type), in order, for the audit line
	fields    map[string]json.RawMessage
	tools     []map[string]json.RawMessage
	body      []byte
	tape      *tape            // body read once; find walks it
	at        map[string]int32 // each field's node in tape
	changed   bool             // fields were rewritten (redaction): Body re-encodes, tape is stale
}

// Body is the body to forward: the bytes received, unless redaction rewrote them.
func (r *Request) Body() ([]byte, error) {
	if !r.changed {
		return r.body, nil
	}
	return marshal(r.fields)
}

// Parse reads a request body strictly: one JSON object, no duplicate or case-variant keys at any
// depth (encoding/json v1 would take {"model":"a","MODEL":"b"} as "b": docs/pitfalls.md), no
// nesting beyond MaxDepth, and well-typed values for the fields llm checks.
func Parse(body []byte) (*Request, *Refusal) {
	if err := strictjson.Check(body, MaxDepth); err != nil {
		return nil, refuse(ReasonBadJSON, "the request body is not strict JSON: %v", err)
	}
	t, err := read(body) // the fast reader: a large body is read once here, not twice
	if err != nil || t.kind(0) != '{' {
		return nil, Refuse(ReasonBadJSON, "")
	}
	r := &Request{body: body, tape: t, fields: map[string]json.RawMessage{}, at: map[string]int32{}}
	if err := t.each(0, func(c int32) error {
		key, err := t.key(c)
		r.fields[string(key)], r.at[string(key)] = t.raw(c), c
		return err
	}); err != nil {
		return nil, Refuse(ReasonBadJSON, "")
	}
	if f := r.fields["model"]; f != nil && json.Unmarshal(f, &r.Model) != nil {
		return nil, refuse(ReasonBadField, "model must be a string")
	}
	if f := r.fields["stream"]; f != nil && json.Unmarshal(f, &r.Stream) != nil {
		return nil, refuse(ReasonBadField, "stream must be a boolean")
	}
	if f := r.fields["max_tokens"]; f != nil && (isNull(f) || json.Unmarshal(f, &r.MaxTokens) != nil) {
		return nil, refuse(ReasonBadField, "max_tokens must be an integer")
	}
	if m := r.fields["messages"]; len(m) == 0 || m[0] != '[' {
		return nil, refuse(ReasonBadField, "messages must be an array")
	}
	if f := r.fields["tools"]; f != nil && json.Unmarshal(f, &r.tools) != nil {
		return nil, refuse(ReasonBadField, "tools must be an array of objects")
	}
	for i, t := range r.tools {
		var typ, name string
		if t == nil || json.Unmarshal(orNull(t["type"]), &typ) != nil || json.Unmarshal(orNull(t["name"]), &name) != nil {
			return nil, refuse(ReasonBadField, "tools[%d]: type and name must be strings", i)
		}
		r.Tools = append(r.Tools, name)
	}
	return r, nil
}

// Check decides whether a parsed request may be forwarded to endpoint with the anthropic-beta
// header values betas (each header line, comma-separated as sent). It returns nil to allow.
func Check(rules *Rules, r *Request, ep Endpoint, betas []string) *Refusal {
	for _, k := range slices.Sorted(maps.Keys(r.fields)) {
		if !known[k] && !rules.extraFields[k] {
			return refuse(ReasonUnknownField, "the top-level field %q is not allowed by the policy (business.llm.extra_fields)", k)
		}
	}
	if !rules.models[r.Model] {
		return refuse(ReasonModel, "the model %q is not allowed by the policy (business.llm.models)", r.Model)
	}
	_, present := r.fields["max_tokens"]
	switch {
	case !present && ep == Create:
		return refuse(ReasonMaxTokens, "max_tokens is required")
	case present && r.MaxTokens <= 0:
		return refuse(ReasonMaxTokens, "max_tokens must be positive")
	case r.MaxTokens > rules.maxTokens:
		return refuse(ReasonMaxTokens, "max_tokens %d is above the policy's cap of %d (business.llm.max_tokens)", r.MaxTokens, rules.maxTokens)
	}
	if ref := CheckBetas(rules, betas); ref != nil {
		return ref
	}
	if ref := checkTools(rules, r.tools); ref != nil {
		return ref
	}
	return checkMCP(rules, r.fields["mcp_servers"])
}

// CheckBetas refuses an anthropic-beta value the policy does not list. betas are the header's
// lines as sent, each a comma-separated list. Betas switch on provider features (some make the
// provider fetch URLs: docs/pitfalls.md), on every endpoint.
func CheckBetas(rules *Rules, betas []string) *Refusal {
	for _, line := range betas {
		for b := range strings.SplitSeq(line, ",") {
			if b = strings.TrimSpace(b); b != "" && !rules.betas[b] {
				return refuse(ReasonBeta, "the anthropic-beta value %q is not allowed by the policy (business.llm.betas)", b)
			}
		}
	}
	return nil
}

// checkTools refuses provider-executed tools the policy does not list and a client tool list
// whose hash the policy does not pin.
func checkTools(rules *Rules, tools []map[string]json.RawMessage) *Refusal {
	for _, t := range tools {
		if typ := toolType(t); !clientTool(typ) && !rules.serverTools[typ] {
			return refuse(ReasonServerTool, "the server-side tool type %q is not allowed by the policy (business.llm.server_tools)", typ)
		}
	}
	client, err := clientTools(tools)
	if err != nil {
		return refuse(ReasonBadField, "tools: %v", err)
	}
	if len(client) == 0 {
		return nil // no tool offered, nothing to pin
	}
	h, err := hashTools(client)
	if err != nil {
		return refuse(ReasonBadField, "tools: %v", err)
	}
	if !rules.tools[h] {
		return refuse(ReasonToolsNotPinned, "the tool list (%s) is not pinned by the policy (business.llm.tools)", h)
	}
	return nil
}

// checkMCP refuses any MCP server URL the policy does not list: the provider, not the agent,
// connects to it, for whoever sent the request (docs/pitfalls.md).
func checkMCP(rules *Rules, raw json.RawMessage) *Refusal {
	if raw == nil {
		return nil
	}
	var servers []struct {
		URL *string `json:"url"`
	}
	if err := json.Unmarshal(raw, &servers); err != nil {
		return refuse(ReasonBadField, "mcp_servers must be an array of objects")
	}
	for i, s := range servers {
		if s.URL == nil || !rules.mcpServers[*s.URL] {
			return refuse(ReasonMCPServer, "mcp_servers[%d]: the URL is not allowed by the policy (business.llm.mcp_servers)", i)
		}
	}
	return nil
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// orNull makes an absent field decode as null (leaving the target's zero value).
func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

// marshal encodes v without HTML escaping, so redaction changes nothing but the redacted text.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
