package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// AdminAction is the approval gate's action for a command under the admin profile (its tier is
// every: each command needs its own approval).
const AdminAction = "bash.admin"

// adminShown is how much of a command an admin request's summary shows, in runes.
const adminShown = 120

// AdminRequest is what a person approves for s, a command under the admin profile: canonical,
// the bytes that bind the run exactly (everything Run uses but Approval, after the defaults are
// filled in), and summary, a short text for the person that shows the start of the command. A
// Spec Run would refuse, or whose command or working folder is not valid UTF-8 (which JSON
// could not keep apart), is an error.
func AdminRequest(s Spec) (canonical []byte, summary string, err error) {
	if s.Profile != Admin {
		return nil, "", fmt.Errorf("profile %q: only admin asks a person", s.Profile)
	}
	if !utf8.ValidString(s.Command) || !utf8.ValidString(s.Cwd) {
		return nil, "", errors.New("command or cwd: not valid UTF-8")
	}
	n, err := s.normalize()
	if err != nil {
		return nil, "", err
	}
	canonical, err = json.Marshal(struct {
		V         int      `json:"v"`
		Profile   Profile  `json:"profile"`
		Command   string   `json:"command"`
		TimeoutMS int64    `json:"timeout_ms"`
		Cwd       string   `json:"cwd"`
		Workspace string   `json:"workspace"`
		Proxy     string   `json:"proxy"`
		Limits    Limits   `json:"limits"`
		Hide      []string `json:"hide"`
	}{1, n.Profile, n.Command, n.Timeout.Milliseconds(), n.Cwd, n.Workspace, n.ProxyAddr, n.Limits, n.Hide})
	return canonical, adminSummary(n), err
}

// adminSummary is "admin: " and the command's first 120 runes, each run of white space one
// space; the working folder and, for a command cut short, its length come first, where the
// gate's own cut (at gate.MaxSummary) cannot drop them: the person must not take a shortened
// command for the whole of it. The gate makes the text safe for a terminal.
func adminSummary(s Spec) string {
	text := strings.Join(strings.Fields(s.Command), " ")
	var b strings.Builder
	b.WriteString("admin")
	if s.Cwd != "" {
		fmt.Fprintf(&b, " in %.30s", s.Cwd)
	}
	if utf8.RuneCountInString(text) > adminShown {
		text = string([]rune(text)[:adminShown]) + "…"
		fmt.Fprintf(&b, " [%d-byte command, shortened]", len(s.Command))
	}
	return b.String() + ": " + text
}
