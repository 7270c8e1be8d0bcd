package messages

import "testing"

// TestParseRefusesWhatAnotherReaderReadsOtherwise: bodies in which another JSON reader (Go's
// encoding/json, or a lenient one: last duplicate wins, keys folded by case, escapes in keys, a
// BOM, comments, NaN, trailing data) could read another model or other content than llm checks.
// Each was tried by an attack on llm's one-pass reader (2 December 2026) and held; kept so that
// it keeps holding.
func TestParseRefusesWhatAnotherReaderReadsOtherwise(t *testing.T) {
	const ok = `"max_tokens":10,"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct{ name, body string }{
		{"a byte-order mark", "\ufeff{\"model\":\"m\"," + ok + "}"},
		{"a duplicate model", `{"model":"m","model":"n",` + ok + `}`},
		{"model and MODEL", `{"model":"m","MODEL":"n",` + ok + `}`},
		{"an escaped duplicate key", `{"model":"m","mod\u0065l":"n",` + ok + `}`},
		{"a Kelvin sign folding onto k", "{\"model\":\"m\",\"max_to\u212aens\":99999," + ok + "}"},
		{"trailing data", `{"model":"m",` + ok + `}{}`},
		{"a comment", `{"model":"m",` + ok + `}//x`},
		{"NaN", `{"model":"m","temperature":NaN,` + ok + `}`},
		{"invalid UTF-8", "{\"model\":\"m\xff\"," + ok + "}"},
		{"a duplicate content", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi","content":"AKIAQYLPMN5HHHFPZAM2"}]}`},
		{"content and Content", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi","Content":"AKIAQYLPMN5HHHFPZAM2"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, ref := Parse([]byte(tt.body)); ref == nil || ref.Reason != ReasonBadJSON && ref.Reason != ReasonBadField {
				t.Errorf("Parse(%.60q) = %v, want a refusal of the body", tt.body, ref)
			}
		})
	}
	// The same body without the trick is accepted: the refusals above are the tricks'.
	if _, ref := Parse([]byte(`{"model":"m",` + ok + `}`)); ref != nil {
		t.Fatalf("the plain body is refused: %v", ref)
	}
}
