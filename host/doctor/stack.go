package doctor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/sharness-ai/sharness/policies/keys"
)

// Stack is what the running stack attests about its policy, and the hash the person supplied.
//
// The attestation is the launcher's "session started" line: the launcher is the component that
// compares the mounted manifest with the supplied hash (or pinned key) and refuses to mint the
// session CA otherwise, so the hash on that line is the one every SVID of the session was issued
// under. The same hash is in the launcher's signed session record, but that lives on a volume
// only root can read; the containers' SHARNESS_AI_POLICY_HASH is only what compose was given,
// and the kms bundle's hash is one component's word, not the check's.
type Stack struct {
	Project  string
	Supplied string  // the hash the person supplied (--policy-hash, SHARNESS_AI_POLICY_HASH); "" if none
	Session  Session // what the launcher's last "session started" line says
	Err      error   // wraps ErrNoStack when no launcher of the project runs
}

// Session is what one "session started" line of the launcher says.
type Session struct {
	Policy    string // sha256:<hex>
	SessionCA string // hex SHA-256 of the session CA certificate
}

// SessionLine is the message of the launcher's canonical start line (images/launcher).
const SessionLine = "session started"

// ParseSession finds the last "session started" line in the launcher's output (slog JSON lines;
// anything else is skipped): a launcher that restarted began a new session, and only the newest
// one runs.
func ParseSession(logs []byte) (Session, error) {
	var last *Session
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var l struct {
			Msg       string `json:"msg"`
			Policy    string `json:"policy"`
			SessionCA string `json:"session_ca_sha256"`
		}
		if json.Unmarshal(line, &l) != nil || l.Msg != SessionLine {
			continue
		}
		if err := keys.CheckHash(l.Policy); err != nil || !sha256Hex.MatchString(l.SessionCA) {
			return Session{}, fmt.Errorf("a %q line with policy %q and session_ca_sha256 %q: not a policy hash and a session CA hash", SessionLine, l.Policy, l.SessionCA)
		}
		last = &Session{Policy: l.Policy, SessionCA: l.SessionCA}
	}
	if err := sc.Err(); err != nil {
		return Session{}, fmt.Errorf("read the launcher's logs: %w", err)
	}
	if last == nil {
		return Session{}, fmt.Errorf("no %q line in the launcher's logs", SessionLine)
	}
	return *last, nil
}

// policyCheck compares the policy the running stack's launcher started its session with against
// the hash the person supplied. Without a running stack there is nothing to compare; without a
// supplied hash, nothing to compare it with, which is reported (degraded), not failed.
func policyCheck(f Facts) (Status, string) {
	s := f.Stack
	switch {
	case errors.Is(s.Err, ErrNoStack) || s.Err == nil && s.Session.Policy == "":
		return Skipped, fmt.Sprintf("no launcher of project %q is running (%v): no stack's policy to compare", s.Project, orText(s.Err, ErrNoStack.Error()))
	case s.Err != nil:
		return Fail, fmt.Sprintf("the launcher of project %q runs, but its session line cannot be read: %v; wait until it is healthy (sharness-ai status -p %s), or read docker compose -p %s logs launcher", s.Project, s.Err, s.Project, s.Project)
	case s.Supplied == "":
		return Degraded, fmt.Sprintf("project %s runs policy %s (session CA %s), and no hash was supplied to compare it with: pass --policy-hash or set SHARNESS_AI_POLICY_HASH to the hash you trust", s.Project, s.Session.Policy, s.Session.SessionCA)
	case s.Supplied != s.Session.Policy:
		return Fail, fmt.Sprintf("project %s runs policy %s, not the supplied %s: this stack does not enforce the policy you trust; stop it (sharness-ai down -p %s) and start the one you trust (sharness-ai up -p %s --policy-hash %s)", s.Project, s.Session.Policy, s.Supplied, s.Project, s.Project, s.Supplied)
	}
	return OK, fmt.Sprintf("project %s runs policy %s, the supplied hash (session CA %s)", s.Project, s.Session.Policy, s.Session.SessionCA)
}

// sha256Hex is a lower-case hex SHA-256, as the launcher prints the session CA's.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
