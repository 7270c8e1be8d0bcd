package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AdminAction is the approval gate's action for a command under the admin profile (its tier is
// every: each command needs its own approval).
const AdminAction = "bash.admin"

// AdminShown is the longest command, as a person reads it in a request's summary (quoted: see
// adminSummary), that admin puts to the gate. A longer one is refused rather than shortened: a
// person approves only a command they can read whole.
const AdminShown = 140

// adminCwdShown is the same for the working folder: with "admin in " and ": ", the summary stays
// within the gate's 200 runes, which it would otherwise cut.
const adminCwdShown = 40

// AdminRequest is what a person approves for s, a command under the admin profile: canonical,
// the bytes that bind the run exactly (everything Run uses but Approval, after the defaults are
// filled in), and summary, a text for the person that shows the whole command. A Spec Run would
// refuse, a command or working folder that is not valid UTF-8 (which JSON could not keep apart),
// and a command longer than AdminShown as the person would read it, are errors.
func AdminRequest(s Spec) (canonical []byte, summary string, err error) {
	if s.Profile != Admin {
		return nil, "", fmt.Errorf("profile %q: only admin asks a person", s.Profile)
	}
	if !utf8.ValidString(s.Command) || !utf8.ValidString(s.Cwd) {
		return nil, "", errors.New("command or cwd: not valid UTF-8")
	}
	if n := utf8.RuneCountInString(strconv.Quote(s.Command)); n > AdminShown {
		return nil, "", fmt.Errorf("the command is %d characters as the person would read it, over %d: a person approves only what they can read whole, so shorten it", n, AdminShown)
	}
	if n := utf8.RuneCountInString(strconv.Quote(s.Cwd)); n > adminCwdShown {
		return nil, "", fmt.Errorf("the working folder is %d characters as the person would read it, over %d: use a shorter one", n, adminCwdShown)
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

// adminSummary is "admin: " and the command as a Go string literal (strconv.Quote): a newline
// shows as \n, a tab as \t, a backslash as \\, and anything unprintable (a control character, a
// bidirectional override: CVE-2021-42574) as its escape, so that what the person reads is the
// command bash runs, and no two commands read alike. "make\ninstall" (two commands) and
// "make install" (one) must not both read "make install". The working folder comes first.
func adminSummary(s Spec) string {
	var b strings.Builder
	b.WriteString("admin")
	if s.Cwd != "" {
		fmt.Fprintf(&b, " in %s", strconv.Quote(s.Cwd))
	}
	return b.String() + ": " + strconv.Quote(s.Command)
}
