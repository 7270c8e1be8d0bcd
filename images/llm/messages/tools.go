package messages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// clientPrefixes are the Anthropic-defined tool types the client executes, not the provider:
// their schemas are Anthropic's, but the agent runs them, so they are part of the agent's tool
// surface and are pinned with the custom tools rather than allowlisted as server tools. (The
// provider fetches nothing for them.)
var clientPrefixes = []string{"bash_", "text_editor_", "computer_", "memory_"}

// clientTool reports whether a tool of this "type" runs on the client: a custom tool (no type,
// or "custom") or an Anthropic-defined client tool. Everything else (web_search_*,
// web_fetch_*, code_execution_*, mcp_toolset, any type llm does not know) runs at the
// provider and needs business.llm.server_tools.
func clientTool(typ string) bool {
	if typ == "" || typ == "custom" {
		return true
	}
	for _, p := range clientPrefixes {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

func toolType(t map[string]json.RawMessage) string {
	var typ string
	_ = json.Unmarshal(orNull(t["type"]), &typ) // Parse checked it is a string
	return typ
}

// clientTools returns the client-executed tools in request order, each without cache_control:
// that is a caching hint the client moves between turns, not part of what the tool is.
func clientTools(tools []map[string]json.RawMessage) ([]map[string]json.RawMessage, error) {
	var out []map[string]json.RawMessage
	for i, t := range tools {
		if !clientTool(toolType(t)) {
			continue
		}
		if err := exactNumbers(t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		c := make(map[string]json.RawMessage, len(t))
		for k, v := range t {
			if k != "cache_control" {
				c[k] = v
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// ToolsHash is the pin of a request's tool list, as business.llm.tools holds it: "sha256:" and
// the hex SHA-256 of the RFC 8785 (JCS) form of the array of the client-executed tools (custom
// and Anthropic-defined client tools, see clientTool), in request order, each without
// cache_control. Server-side tools are not hashed: server_tools allowlists them. Reordering
// tools changes the hash, as it changes what the model is told. tools is the request's "tools"
// array; it must be strict JSON (Parse's rules). An empty client list hashes too, but llm does
// not ask for a pin when no client tool is offered.
func ToolsHash(tools json.RawMessage) (string, error) {
	var ts []map[string]json.RawMessage
	if err := json.Unmarshal(tools, &ts); err != nil {
		return "", fmt.Errorf("tools must be an array of objects: %w", err)
	}
	client, err := clientTools(ts)
	if err != nil {
		return "", err
	}
	return hashTools(client)
}

func hashTools(client []map[string]json.RawMessage) (string, error) {
	if client == nil {
		client = []map[string]json.RawMessage{}
	}
	b, err := marshal(client)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(b)
	if err != nil {
		return "", fmt.Errorf("canonicalize tools: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// exactNumbers refuses a number that JCS would round (it encodes numbers as IEEE doubles):
// otherwise {"maxItems": 9007199254740993} and {"maxItems": 9007199254740992} would hash the
// same, and a pin would cover a tool list it was not made for.
func exactNumbers(t map[string]json.RawMessage) error {
	for _, raw := range t {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		for {
			tok, err := dec.Token()
			if err != nil {
				break // end of value; Parse already refused invalid JSON
			}
			n, ok := tok.(json.Number)
			if !ok {
				continue
			}
			if !sameAfterJCS(string(n)) {
				return fmt.Errorf("the number %.40s is not one JCS keeps (it would round it to another value)", n)
			}
		}
	}
	return nil
}

// sameAfterJCS reports whether JCS's form of the number n (the shortest decimal of the nearest
// double) has the value n has. Long numbers and large exponents are refused before any
// arithmetic, so a hostile 1e-999999999 costs nothing.
func sameAfterJCS(n string) bool {
	if len(n) > 40 {
		return false
	}
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+")); err != nil || e > 400 || e < -400 {
			return false
		}
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false
	}
	want, ok := new(big.Rat).SetString(n)
	got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok && ok2 && want.Cmp(got) == 0
}
