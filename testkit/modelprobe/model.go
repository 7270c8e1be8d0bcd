package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// The demo agent's pinned tool list and an allowed model (policies/default, L3-llm).
const (
	allowedModel = "claude-sonnet-4-5"
	pinnedTools  = `[{"name":"workspace_status","description":"Reports what the agent's sandbox allows, as JSON.","input_schema":{"type":"object","properties":{}}}]`
)

// Planted secrets: fake, but in the formats the filter's curated rules know. Assembled at run
// time so that no scanner flags this source file.
var (
	awsKey    = "AKIA" + "QYLPMN5HHHFPZAM2"
	pemKey    = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzvQ1Xv9TfKx3zKqV0m8z0lq4bXW6q9Zx7yJQm3tP2bVh8Hk\n-----END " + "RSA PRIVATE KEY-----"
	bearerTok = "Authorization: Bearer " + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlLWZvci10ZXN0cy1vbmx5"
)

// request is one attempt at llm: a body, extra headers, and what counts as the right refusal.
type request struct {
	name, expected, why string
	body                []byte
	header              http.Header
	secret              string // must not come back in the answer
}

func body(mutate func(m map[string]any)) []byte {
	m := map[string]any{"model": allowedModel, "max_tokens": 64,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}}}
	if mutate != nil {
		mutate(m)
	}
	b, _ := json.Marshal(m)
	return b
}

// toolResult is a conversation whose tool result carries text.
func toolResult(text string) []byte {
	return body(func(m map[string]any) {
		m["tools"] = json.RawMessage(pinnedTools)
		m["messages"] = []any{
			map[string]any{"role": "user", "content": "use tool workspace_status"},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "workspace_status", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "output: " + text}}},
		}
	})
}

func modelDoors(base, key string) []sidedoor.Door {
	reqs := []request{
		{name: "model/not-allowed", expected: "400/model_not_allowed", why: "spending the budget on a model the person did not choose",
			body: body(func(m map[string]any) { m["model"] = "claude-3-opus-20240229" })},
		{name: "model/tools-changed", expected: "400/tools_not_pinned", why: "a prompt-injected agent giving itself a new tool",
			body: body(func(m map[string]any) {
				m["tools"] = json.RawMessage(strings.Replace(pinnedTools, "Reports what", "Runs whatever", 1))
			})},
		{name: "model/max-tokens", expected: "400/max_tokens", why: "one request spending the session's budget",
			body: body(func(m map[string]any) { m["max_tokens"] = 1 << 20 })},
		{name: "model/duplicate-key", expected: "400/invalid_json", why: "llm and the API reading two different models from one body",
			body: []byte(`{"model":"` + allowedModel + `","max_tokens":64,"messages":[],"model":"claude-3-opus-20240229"}`)},
		{name: "model/case-variant-key", expected: "400/invalid_json", why: "encoding/json v1 folding MODEL onto model",
			body: []byte(`{"model":"` + allowedModel + `","MODEL":"claude-3-opus-20240229","max_tokens":64,"messages":[]}`)},
		{name: "model/unknown-field", expected: "400/unknown_field", why: "a field llm does not check reaching the API",
			body: body(func(m map[string]any) { m["fallbacks"] = []string{"claude-3-opus-20240229"} })},
		{name: "model/web-fetch-tool", expected: "400/server_tool", why: "the provider fetching URLs on the agent's behalf, around net",
			body: body(func(m map[string]any) {
				m["tools"] = []any{map[string]any{"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 5}}
			})},
		{name: "model/mcp-server", expected: "400/mcp_server", why: "the provider calling an MCP server the agent names",
			body: body(func(m map[string]any) {
				m["mcp_servers"] = []any{map[string]any{"type": "url", "url": "https://mcp.attacker.example/sse", "name": "x"}}
			})},
		{name: "model/beta", expected: "400/beta_not_allowed", why: "a beta flag that turns on provider-side fetching",
			body: body(nil), header: http.Header{"Anthropic-Beta": {"mcp-client-2025-04-04"}}},
		{name: "model/malformed", expected: "400/invalid_json", why: "a body llm cannot read forwarded as is",
			body: []byte(`{"model":`)},
		{name: "model/oversized", expected: "400/too_large", why: "memory exhaustion through one request",
			body: bytes.Repeat([]byte("a"), 33<<20)},
		{name: "secret/aws-key", expected: "400/secret", why: "a credential from the workspace reaching the model",
			body: toolResult("aws_access_key_id = " + awsKey), secret: awsKey},
		{name: "secret/pem-key", expected: "400/secret", why: "a private key from the workspace reaching the model",
			body: toolResult(pemKey), secret: "MIIEowIBAAKCAQEAzvQ1Xv9TfKx3zKqV0m8z0lq4"},
		{name: "secret/bearer-token", expected: "400/secret", why: "a token from a config file reaching the model",
			body: toolResult("curl -H '" + bearerTok + "'"), secret: "c2lnbmF0dXJlLWZvci10ZXN0cy1vbmx5"},
		{name: "model/allowed", expected: "200", why: "the allowed path must work", body: toolResult("nothing secret here")},
	}
	if key != "" {
		for enc, v := range map[string]string{
			"raw": key, "base64": base64.StdEncoding.EncodeToString([]byte(key)), "hex": hex.EncodeToString([]byte(key)),
			"url": url.QueryEscape(key), "json": strings.ReplaceAll(jsonString(key), `-`, `\u002d`),
		} {
			reqs = append(reqs, request{name: "secret/api-key-" + enc, expected: "400/secret", secret: v,
				why: "the stack's own API key (" + enc + ") reaching the model", body: toolResult("found: " + v)})
		}
	}
	doors := make([]sidedoor.Door, 0, len(reqs))
	for _, r := range reqs {
		doors = append(doors, sidedoor.Door{Name: r.name, Expected: r.expected, Why: r.why, Limit: 30e9,
			Try: func(ctx context.Context) (string, string) { return post(ctx, base, r) }})
	}
	return doors
}

// jsonString is s as a JSON string literal's contents.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// client talks to llm directly: the agent's HTTP_PROXY (net) is for the outside world.
var client = &http.Client{Transport: &http.Transport{Proxy: nil}}

// post sends r and names the outcome "<status>/<X-Sharness-Deny>", or "200", or "echoed" when
// the answer repeats the planted secret.
func post(ctx context.Context, base string, r request) (string, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/messages", bytes.NewReader(r.body))
	if err != nil {
		return sidedoor.Kind(err), ""
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", "sharness-placeholder-not-a-key")
	for k, v := range r.header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return sidedoor.Kind(err), ""
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if r.secret != "" && bytes.Contains(answer, []byte(r.secret)) {
		return "echoed", "the answer repeats the planted secret"
	}
	note := string(answer)
	if len(note) > 300 {
		note = note[:300]
	}
	if resp.StatusCode == http.StatusOK {
		return "200", ""
	}
	return fmt.Sprintf("%d/%s", resp.StatusCode, resp.Header.Get("X-Sharness-Deny")), note
}

// callDoor is one ordinary request: "ok" expects an answer; "kms-down" expects llm to fail
// closed because it cannot get the key.
func callDoor(base, want string) sidedoor.Door {
	expected := map[string]string{"ok": "200", "kms-down": "503/key_unavailable"}[want]
	if expected == "" {
		fail("-call %q: want ok or kms-down", want)
	}
	r := request{name: "model/call-" + want, expected: expected, why: "llm with kms " + map[string]string{"ok": "present", "kms-down": "away"}[want], body: body(nil)}
	return sidedoor.Door{Name: r.name, Expected: r.expected, Why: r.why, Limit: 30e9,
		Try: func(ctx context.Context) (string, string) { return post(ctx, base, r) }}
}
