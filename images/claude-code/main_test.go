package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestKeyTail(t *testing.T) {
	for _, tc := range []struct{ name, key, want string }{
		{"placeholder", "sharness-placeholder-not-a-key", "laceholder-not-a-key"},
		{"short", "abc", "abc"},
		{"empty", "", ""},
		{"trimmed", " sk-ant-api03-0123456789abcdefghij\n", "0123456789abcdefghij"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyTail(tc.key); got != tc.want {
				t.Errorf("keyTail(%q): got %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	t.Run("writes", func(t *testing.T) {
		home := t.TempDir()
		if err := prepare(home, "sharness-placeholder-not-a-key"); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(home, ".claude.json")
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("mode: got %v, want 0600", got)
		}
		data, _ := os.ReadFile(path)
		var c map[string]any
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if c["hasCompletedOnboarding"] != true {
			t.Errorf("hasCompletedOnboarding: got %v, want true", c["hasCompletedOnboarding"])
		}
		r, _ := c["customApiKeyResponses"].(map[string]any)
		if a, _ := r["approved"].([]any); len(a) != 1 || a[0] != "laceholder-not-a-key" {
			t.Errorf("approved: got %v, want [laceholder-not-a-key]", r["approved"])
		}
		if rj, ok := r["rejected"].([]any); !ok || len(rj) != 0 {
			t.Errorf("rejected: got %v, want []", r["rejected"])
		}
	})
	t.Run("keeps-existing", func(t *testing.T) {
		home := t.TempDir()
		path := filepath.Join(home, ".claude.json")
		if err := os.WriteFile(path, []byte(`{"theme":"light"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := prepare(home, "k"); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); string(data) != `{"theme":"light"}` {
			t.Errorf("an existing configuration was rewritten: %s", data)
		}
	})
	for _, tc := range []struct{ name, home string }{
		{"no-home", ""},
		{"relative-home", "home"},
		{"missing-home", "/nonexistent/sharness-claude-test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := prepare(tc.home, "k"); err == nil {
				t.Errorf("prepare(%q): no error", tc.home)
			}
		})
	}
}
