package main

import (
	"encoding/json"
	"testing"
)

// FuzzParse feeds arbitrary bodies to the request parser and the script: they must never panic,
// and every reply they make must be well formed.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"offline: error overloaded"}]}`,
		`{"model":"m","max_tokens":100,"tools":[{"name":"t"}],"messages":[{"role":"user","content":[{"type":"text","text":"use tool t"}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"ok"}]}]}]}`,
		`{"model":"m","max_tokens":100,"tools":[{"name":"t"}],"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"use tool t {\"a\":[1]}"}]}]}`,
		`{"model":"m","max_tokens":2,"messages":[{"role":"user","content":"use tool "}],"tools":[{"name":""}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null}]}`,
		`{"model":"m","max_tokens":-1}`, `[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, needMax := range []bool{true, false} {
			c, e := parse(body, needMax)
			if e != nil {
				if e.status != 400 || e.kind != "invalid_request_error" {
					t.Fatalf("parse error %+v", e)
				}
				continue
			}
			if c.inputTokens < 1 || c.messages < 1 || c.model == "" {
				t.Fatalf("parsed %+v", c)
			}
			if !needMax {
				continue
			}
			r, e := script(c, 1)
			if e != nil {
				continue
			}
			if len(r.blocks) == 0 || r.stop == "" || r.outTokens < 1 || r.outTokens > max(c.maxTokens, 9) {
				t.Fatalf("reply %+v to %+v", r, c)
			}
			for _, b := range r.blocks {
				if _, err := json.Marshal(b.json()); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
