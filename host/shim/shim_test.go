package shim

import (
	"bytes"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

const hash = "sha256:b7d380212da950a5b34e99dd3596dca9274f3b09cc3dfc98c5c8fa06557126f9"

func TestPolicyPath(t *testing.T) {
	tests := []struct {
		name, hash, component, want string
	}{
		{"installed", hash, "agent", "/etc/sharness-ai/policies/b7d380212da950a5b34e99dd3596dca9274f3b09cc3dfc98c5c8fa06557126f9/agent/config.json"},
		{"no prefix", strings.TrimPrefix(hash, "sha256:"), "agent", ""},
		{"upper-case hex", strings.ToUpper(hash), "agent", ""},
		{"traversal in hash", "sha256:../../../../etc", "agent", ""},
		{"traversal in component", hash, "../../x", ""},
		{"slash in component", hash, "a/b", ""},
		{"empty component", hash, "", ""},
		{"empty hash", "", "agent", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PolicyPath(DefaultRoot, tt.hash, tt.component); got != tt.want {
				t.Errorf("PolicyPath(%q, %q) = %q, want %q", tt.hash, tt.component, got, tt.want)
			}
		})
	}
}

func TestIdentify(t *testing.T) {
	ann := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name              string
		annotations       map[string]string
		env               []string
		component, policy string
		marked            bool
	}{
		{name: "unmarked", env: []string{"PATH=/bin"}},
		{name: "annotations", annotations: ann("ai.sharness.component", "agent", "ai.sharness.policy", hash),
			component: "agent", policy: hash, marked: true},
		{name: "environment (Docker 20.10)", env: []string{"PATH=/bin", "SHARNESS_AI_COMPONENT=agent", "SHARNESS_AI_POLICY=" + hash, "SHARNESS_AI_POLICY_HASH="},
			component: "agent", policy: hash, marked: true},
		{name: "both agree", annotations: ann("ai.sharness.component", "agent", "ai.sharness.policy", hash),
			env: []string{"SHARNESS_AI_COMPONENT=agent", "SHARNESS_AI_POLICY=" + hash}, component: "agent", policy: hash, marked: true},
		{name: "annotation and environment disagree", annotations: ann("ai.sharness.component", "net"),
			env: []string{"SHARNESS_AI_COMPONENT=agent", "SHARNESS_AI_POLICY=" + hash}, policy: hash, marked: true},
		{name: "environment repeats with another value", env: []string{"SHARNESS_AI_COMPONENT=agent", "SHARNESS_AI_POLICY=" + hash, "SHARNESS_AI_COMPONENT=net"},
			policy: hash, marked: true},
		{name: "component only", env: []string{"SHARNESS_AI_COMPONENT=agent"}, component: "agent", marked: true},
		{name: "policy annotation only", annotations: ann("ai.sharness.policy", hash), policy: hash, marked: true},
		{name: "empty value", env: []string{"SHARNESS_AI_COMPONENT=", "SHARNESS_AI_POLICY="}, marked: true},
		{name: "a longer name is not the variable", env: []string{"SHARNESS_AI_POLICY_HASH=" + hash}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &specs.Spec{Annotations: tt.annotations, Process: &specs.Process{Env: tt.env}}
			c, p, m := Identify(s)
			if c != tt.component || p != tt.policy || m != tt.marked {
				t.Errorf("Identify = %q, %q, %v; want %q, %q, %v", c, p, m, tt.component, tt.policy, tt.marked)
			}
		})
	}
	if _, _, m := Identify(nil); m {
		t.Error("a nil spec is marked")
	}
	if _, _, m := Identify(&specs.Spec{}); m {
		t.Error("a spec without a process is marked")
	}
}

// loadCases seed FuzzLoadSpec too.
var loadCases = []struct {
	name string
	data string
	ok   bool
}{
	{"minimal", `{"ociVersion":"1.0.2","root":{"path":"rootfs","readonly":true}}`, true},
	{"unknown fields", `{"ociVersion":"1.0.2","x-engine":{"a":1},"root":{"path":"rootfs"}}`, true},
	{"trailing value", `{"ociVersion":"1.0.2"} {}`, false},
	{"trailing garbage", `{"ociVersion":"1.0.2"}x`, false},
	{"duplicate key", `{"root":{"path":"rootfs","readonly":true,"readonly":false}}`, false},
	{"case-folded duplicate", `{"root":{"path":"rootfs","readonly":true,"READONLY":false}}`, false},
	{"wrong type", `{"root":{"readonly":"yes"}}`, false},
	{"invalid UTF-8", "{\"hostname\":\"\xff\"}", false},
	{"not an object", `[]`, false},
	{"empty", ``, false},
}

func TestLoadSpec(t *testing.T) {
	for _, tt := range loadCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadSpec([]byte(tt.data))
			if (err == nil) != tt.ok {
				t.Errorf("LoadSpec(%q) error = %v, want ok %v", tt.data, err, tt.ok)
			}
		})
	}
	big := append([]byte(`{"hostname":"`), bytes.Repeat([]byte("a"), MaxSpecSize)...)
	if _, err := LoadSpec(append(big, `"}`...)); err == nil {
		t.Error("a spec above MaxSpecSize was loaded")
	}
	agent, raw := compiled(t, "agent")
	if c, p, m := Identify(agent); c != "agent" || p == "" || !m {
		t.Errorf("the compiled agent identifies as %q, %q, %v", c, p, m)
	}
	if len(raw) == 0 {
		t.Fatal("empty compiled spec")
	}
}

func FuzzLoadSpec(f *testing.F) {
	for _, tt := range loadCases {
		f.Add([]byte(tt.data))
	}
	_, raw := compiled(f, "agent")
	f.Add(raw)
	want, _ := compiled(f, "agent")
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := LoadSpec(data)
		if err != nil {
			return
		}
		Identify(s)
		Check(want, s, fixtureFacts(s))
		Check(s, s, Facts{})
		if s.Process != nil {
			CheckProcess(want, s.Process, Facts{})
		}
		if s.Linux != nil {
			CheckResources(want, s.Linux.Resources)
		}
	})
}
