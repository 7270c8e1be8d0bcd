package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzWriteRequest: any body decodes to a request or a refusal, never a panic; a body accepted
// is one JSON object without duplicate keys, and its path and content are what encoding/json reads.
func FuzzWriteRequest(f *testing.F) {
	for _, s := range []string{
		`{"path":".claude/x","content":"a"}`, `{"path":".claude/x","content_base64":"YQ=="}`,
		`{"path":".claude/x","content":"a","mode":"0644"}`, `{"path":".claude/x","content":"a","path":"b"}`,
		`{"path":".claude/x","content":"a","PATH":"b"}`, `{"path":".claude/x","content":"a"} {}`, `["x"]`, `null`, ``,
		`{"path":".claude/x","content":"a","mode":420}`, `{"path":"\u0000","content":"\ud800"}`, `{"from":"a","to":"b"}`,
	} {
		f.Add("write", []byte(s))
		f.Add("rename", []byte(s))
		f.Add("delete", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		if name != "write" && name != "delete" && name != "rename" {
			return
		}
		o, bad := decode(name, body)
		if bad != nil {
			if bad.reason == "" || bad.message == "" {
				t.Fatalf("refusal without reason or message: %+v", bad)
			}
			return
		}
		if o.Path == "" || name == "rename" && o.To == "" {
			t.Fatalf("accepted %q without a path: %+v", body, o)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil && strings.TrimSpace(string(body)) != "" {
			t.Fatalf("accepted %q, which encoding/json does not read as an object: %v", body, err)
		}
		if p, _ := m["path"].(string); name != "rename" && p != o.Path {
			t.Fatalf("decoded path %q, encoding/json reads %q", o.Path, p)
		}
		if c, ok := m["content"].(string); ok && c != string(o.Content) {
			t.Fatalf("decoded content differs from encoding/json's")
		}
	})
}
