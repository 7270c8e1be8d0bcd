package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/sharness-ai/sharness/internal/secretfilter"
)

// Hit is one finding of the secret filter: which rule, and where in the scanned text.
type Hit = secretfilter.Hit

// Scanner is the part of the secret filter llm uses; *secretfilter.Filter is one. Scan must
// not keep text once it returns: find decodes every string into one reused buffer.
type Scanner interface {
	Scan(text []byte) []Hit
	Redact(text []byte) ([]byte, []Hit)
}

// Findings are what the filter found in a request: rule names and places, never the text.
type Findings struct {
	Rules []string // sorted, unique
	Where []string // "system", "messages[i]", in order of appearance
}

// skipKeys are block fields that hold identifiers, types and encodings, never prose: scanning
// them would only give the entropy rules false hits (tool_use ids, media types).
var skipKeys = set{"type": true, "id": true, "tool_use_id": true, "media_type": true, "file_id": true}

// Secrets runs the filter over the text the agent sends: system, and the content of every message
// but the assistant's (user, a "system" role message as Claude Code sends, and any role this
// package does not know), whether a string or blocks, including tool_result content at any depth
// and text documents. Every string there is scanned except identifier fields (skipKeys) and the
// data of base64 sources (images, PDFs), which no text filter can read. Assistant turns are not
// scanned: the provider wrote them, and an agent rewriting them to smuggle a secret can as well
// encode it.
//
// With redact false, any hit refuses the request (ReasonSecret), naming the rules and places
// but never the text. With redact true, each hit is replaced in place and r.Body re-encodes.
func Secrets(s Scanner, r *Request, redact bool) (Findings, *Refusal) {
	f, err := find(s, r)
	switch {
	case err != nil:
		return f, refuse(ReasonBadField, "%v", err)
	case len(f.Rules) == 0:
		return f, nil
	case !redact:
		return f, refuse(ReasonSecret, "the secret filter matched %v in %v; on_secret is refuse, so nothing was sent", f.Rules, f.Where)
	}
	if err := redactAll(s, r); err != nil {
		return f, refuse(ReasonBadField, "redact: %v", err)
	}
	// The redaction path reads the body another way (encoding/json): read the body it will
	// forward again the first way, Parse and all, and refuse if anything is left rather than
	// trust the two to agree.
	b, err := r.Body()
	if err != nil {
		return f, refuse(ReasonBadField, "redact: %v", err)
	}
	again, ref := Parse(b)
	if ref != nil {
		return f, refuse(ReasonSecret, "the secret filter matched %v in %v and the redacted request did not read back; nothing was sent", f.Rules, f.Where)
	}
	if left, err := find(s, again); err != nil || len(left.Rules) > 0 {
		return f, refuse(ReasonSecret, "the secret filter matched %v in %v and redaction did not remove every match; nothing was sent", f.Rules, f.Where)
	}
	return f, nil
}

// scratch holds the buffers find decodes strings into: a large tool result would otherwise
// cost an allocation of its size (and the collector's work) on every request. The scanner
// keeps nothing of the text it is given, so a buffer is free again when find returns.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 4 << 20 // larger buffers go back to the collector, not the pool

// find scans what Secrets covers and returns the findings. It walks r's tape: r must not have
// been rewritten since Parse.
func find(s Scanner, r *Request) (Findings, error) {
	var f Findings
	t := r.tape
	buf := scratch.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxScratch {
			scratch.Put(buf)
		}
	}()
	scan := func(where string, k int32) error {
		found := false
		err := t.strings(k, true, buf, func(text []byte) {
			for _, h := range s.Scan(text) {
				found = true
				if !slices.Contains(f.Rules, h.Rule) {
					f.Rules = append(f.Rules, h.Rule)
				}
			}
		})
		if found {
			f.Where = append(f.Where, where)
		}
		return err
	}
	if k, ok := r.at["system"]; ok {
		if err := scan("system", k); err != nil {
			return f, fmt.Errorf("system: %w", err)
		}
	}
	k, ok := r.at["messages"]
	if !ok || t.kind(k) != '[' {
		return f, errJSON // Parse refuses both
	}
	i := 0
	err := t.each(k, func(m int32) error {
		defer func() { i++ }()
		if t.kind(m) != '{' {
			return fmt.Errorf("messages[%d] must be an object", i)
		}
		var role []byte
		content := int32(-1)
		err := t.each(m, func(c int32) error {
			key, err := t.key(c)
			switch {
			case err != nil:
				return err
			case string(key) == "role":
				role, err = unquote(t.raw(c))
			case string(key) == "content":
				content = c
			}
			return err
		})
		if err != nil || role == nil {
			return fmt.Errorf("messages[%d].role must be a string", i)
		}
		if string(role) == "assistant" || content < 0 {
			return nil
		}
		if err := scan(fmt.Sprintf("messages[%d]", i), content); err != nil {
			return fmt.Errorf("messages[%d].content: %w", i, err)
		}
		return nil
	})
	slices.Sort(f.Rules)
	return f, err
}

// redactAll rewrites the places Secrets scans with every hit redacted. It is the slow path
// (encoding/json, then re-encoding), taken only when there is something to redact.
func redactAll(s Scanner, r *Request) error {
	redactField := func(raw json.RawMessage) (json.RawMessage, error) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // re-encoding must not round numbers
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		changed := false
		v = visit(v, func(text string) string {
			out, hits := s.Redact([]byte(text))
			if len(hits) == 0 {
				return text
			}
			changed = true
			return string(out)
		})
		if !changed {
			return nil, nil
		}
		return marshal(v)
	}
	if raw := r.fields["system"]; raw != nil {
		b, err := redactField(raw)
		if err != nil {
			return err
		}
		if b != nil {
			r.fields["system"], r.changed = b, true
		}
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(r.fields["messages"], &msgs); err != nil {
		return err
	}
	changed := false
	for _, m := range msgs {
		var role string
		if m == nil || json.Unmarshal(orNull(m["role"]), &role) != nil || role == "assistant" || m["content"] == nil {
			continue
		}
		b, err := redactField(m["content"])
		if err != nil {
			return err
		}
		if b != nil {
			m["content"], changed = b, true
		}
	}
	if changed {
		b, err := marshal(msgs)
		if err != nil {
			return err
		}
		r.fields["messages"], r.changed = b, true
	}
	return nil
}

// visit calls fn on every string of v that can carry text, stores what fn returns and returns
// v. A string in a skipped field, or the data of a source of type base64, is left alone.
func visit(v any, fn func(string) string) any {
	switch t := v.(type) {
	case string:
		return fn(t)
	case []any:
		for i := range t {
			t[i] = visit(t[i], fn)
		}
	case map[string]any:
		binary := t["type"] == "base64"
		for k, e := range t {
			if skipKeys[k] || (binary && k == "data") {
				continue
			}
			t[k] = visit(e, fn)
		}
	}
	return v
}

// Redacted reports whether Secrets rewrote the request.
func (r *Request) Redacted() bool { return r.changed }
