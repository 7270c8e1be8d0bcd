// Command sharness-claude is the entrypoint of the Claude Code agent image (compose/claude-code.yml,
// docs/claude-code.md): it prepares Claude Code's user configuration in HOME, then replaces itself
// with Claude Code, given its own arguments.
//
// HOME is an empty tmpfs at every start, so Claude Code would begin with its first-run onboarding,
// which checks that api.anthropic.com answers (through net, which refuses it) and stops there. The
// onboarding is for a person's own machine; here the model is reached through llm and the key
// comes from kms. So this writes what Claude Code records once onboarding is done: onboarding
// complete, and the API key in its environment accepted. That key is the stack's placeholder (llm
// throws it away); Claude Code records its last 20 characters only. A configuration already in
// HOME is left as it is.
//
// It is a program and not a shell script because the image has no shell: nothing Claude Code
// could be told to run (a project's apiKeyHelper, a hook, a status line) finds one.
//
// What it does not guarantee: anything about Claude Code's behaviour. What constrains Claude Code
// is /etc/claude-code (managed settings and MCP servers, read-only in the image), which this does
// not touch, and the container the stack runs it in.
//
// Exit codes: Claude Code's, once it runs; 1 when HOME cannot be prepared or Claude Code cannot be
// started.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// claudePath is where hack/build-claude-code.sh puts Claude Code's binary.
const claudePath = "/usr/local/bin/claude"

func main() {
	if err := run(os.Getenv("HOME"), os.Getenv("ANTHROPIC_API_KEY"), os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "sharness-claude: %v\n", err)
		os.Exit(1)
	}
}

func run(home, key string, args []string) error {
	if err := prepare(home, key); err != nil {
		return err
	}
	argv := append([]string{"claude"}, args...)
	if err := syscall.Exec(claudePath, argv, os.Environ()); err != nil {
		return fmt.Errorf("start %s: %w", claudePath, err)
	}
	return nil
}

// userConfig is the part of ~/.claude.json that onboarding writes.
type userConfig struct {
	HasCompletedOnboarding bool `json:"hasCompletedOnboarding"`
	CustomAPIKeyResponses  struct {
		Approved []string `json:"approved"`
		Rejected []string `json:"rejected"`
	} `json:"customApiKeyResponses"`
}

// prepare writes home/.claude.json unless it exists: onboarding done, key accepted.
func prepare(home, key string) error {
	if home == "" || !filepath.IsAbs(home) {
		return fmt.Errorf("HOME %q is not an absolute path", home)
	}
	path := filepath.Join(home, ".claude.json")
	var c userConfig
	c.HasCompletedOnboarding = true
	c.CustomAPIKeyResponses.Approved = []string{keyTail(key)}
	c.CustomAPIKeyResponses.Rejected = []string{}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write %s (HOME must be writable: compose/claude-code.yml mounts a tmpfs there): %w", path, err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// keyTail is what Claude Code records of an accepted key: its last 20 characters, after trimming
// white space.
func keyTail(key string) string {
	r := []rune(strings.TrimSpace(key))
	if len(r) > 20 {
		r = r[len(r)-20:]
	}
	return string(r)
}
