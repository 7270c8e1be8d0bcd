package shim

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/keys"
)

// SessionDir holds the session records, one per compose project: <SessionDir>/<project>.json,
// root-owned, written when the person starts the stack (`sharness-ai up`, or `sharness-ai
// session record` before a `docker compose up` of one's own). A record fixes what the compose
// file can otherwise choose by interpolation: the policy the person supplied, every host folder
// a component binds (the workspace, the manifest's folder, kms's secrets) and the person's own
// inputs to the components (the operator's approval key, the gate's timeout). The shim refuses a
// component whose container disagrees with its project's record, and one whose project has none.
//
// Why a record and not the policy: the policy is the same on every machine and its hash is what
// the person pins; the folders and the key are this person's on this machine. Why root-owned and
// not signed: the shim already trusts the root-owned compiled policies for the same reason, and
// whoever can write there is root, whom no signature stops.
const SessionDir = "/etc/sharness-ai/sessions"

// Session is one project's record.
type Session struct {
	Project     string `json:"project"`
	Policy      string `json:"policy"`               // the hash the person supplied: sha256:<hex>
	Workspace   string `json:"workspace"`            // absolute, without symbolic links
	Manifest    string `json:"manifest"`             // the manifest's folder: absolute, without symbolic links
	Secrets     string `json:"secrets,omitempty"`    // kms's sealed secrets' folder, likewise
	PolicyKey   string `json:"policy_key,omitempty"` // the key the person pinned instead of a hash, if any
	OperatorKey string `json:"operator_pubkey,omitempty"`
	GateTimeout string `json:"gate_timeout,omitempty"`
}

// projectName is what compose accepts as a project name.
var projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// SessionPath is the record of project under dir, or "" when project is not a compose project name.
func SessionPath(dir, project string) string {
	if !projectName.MatchString(project) {
		return ""
	}
	return filepath.Join(dir, project+".json")
}

// ParseSession decodes a session record strictly and checks each field's shape.
func ParseSession(data []byte) (*Session, error) {
	var s Session
	if err := strictjson.Decode(data, 4, &s); err != nil {
		return nil, fmt.Errorf("session record: %w", err)
	}
	if err := s.Valid(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Valid checks a record's fields: a project name, a policy hash, clean absolute folders.
func (s *Session) Valid() error {
	if !projectName.MatchString(s.Project) {
		return fmt.Errorf("session record: project %q is not a compose project name", s.Project)
	}
	if err := keys.CheckHash(s.Policy); err != nil {
		return fmt.Errorf("session record: policy: %w", err)
	}
	for _, f := range []struct{ name, dir string }{{"workspace", s.Workspace}, {"manifest", s.Manifest}, {"secrets", s.Secrets}} {
		if f.dir == "" && f.name == "secrets" {
			continue
		}
		if !filepath.IsAbs(f.dir) || filepath.Clean(f.dir) != f.dir || f.dir == "/" {
			return fmt.Errorf("session record: %s %q is not a clean absolute folder", f.name, f.dir)
		}
	}
	return nil
}

// hostFolder is the session's folder a compiled host-folder source stands for (the workspace and
// what below it, the manifest's folder, kms's secrets), and whether the source is one.
func (s *Session) hostFolder(compiled string) (string, bool) {
	switch {
	case compiled == compile.WorkspaceRoot:
		return s.Workspace, true
	case strings.HasPrefix(compiled, compile.WorkspaceRoot+"/"):
		return filepath.Join(s.Workspace, strings.TrimPrefix(compiled, compile.WorkspaceRoot+"/")), true
	case compiled == compile.PolicyRoot:
		return s.Manifest, true
	case compiled == compile.SecretsRoot:
		return s.Secrets, true
	}
	return "", false
}

// CheckSession holds a component's container to its project's session: the policy it claims is
// the one the person supplied, and each bind whose compiled source is a host folder binds the
// session's folder (as the host resolved it: f.Sources). s nil is a refusal: a component runs
// only in a session the person started.
func CheckSession(want, got *specs.Spec, f Facts, s *Session, project string) []Reason {
	if s == nil {
		return []Reason{{Field: "session", Want: "the session record of project " + fmt.Sprintf("%q", project) + " (sharness-ai up, or sharness-ai session record)", Got: "none"}}
	}
	var out []Reason
	if p := want.Annotations[compile.AnnotationPolicy]; p != s.Policy {
		out = append(out, Reason{Field: "session.policy", Want: s.Policy + " (the policy the person supplied)", Got: p})
	}
	if got.Process != nil {
		out = append(out, s.checkEnv(got.Process.Env)...)
	}
	compiled := map[string]string{}
	for _, m := range want.Mounts {
		compiled[m.Destination] = m.Source
	}
	for _, m := range got.Mounts {
		if mountKind(m) != "bind" {
			continue
		}
		dir, ok := s.hostFolder(compiled[filepath.Clean(m.Destination)])
		if !ok {
			continue
		}
		field := "mounts[" + m.Destination + "]"
		src, resolved := f.Sources[m.Source]
		switch {
		case dir == "":
			out = append(out, Reason{Field: field, Want: "no such folder (the session records none)", Got: "source " + m.Source})
		case !resolved || src.Err != "":
			out = append(out, Reason{Field: field, Want: "source " + dir + " (the session's)", Got: "source " + m.Source + " (not resolved)"})
		case src.Path != dir:
			out = append(out, Reason{Field: field, Want: "source " + dir + " (the session's)", Got: "source " + describe(m.Source, src)})
		}
	}
	return out
}

// sessionEnv are the person's inputs a compose file hands every component by interpolation; each
// must be what the session recorded, or empty (a component without it is narrower: no approvals,
// the default timeout, the hash check alone).
func (s *Session) sessionEnv() map[string]string {
	return map[string]string{
		"SHARNESS_AI_POLICY_HASH":     s.Policy,
		"SHARNESS_AI_POLICY_KEY":      s.PolicyKey,
		"SHARNESS_AI_OPERATOR_PUBKEY": s.OperatorKey,
		"SHARNESS_AI_GATE_TIMEOUT":    s.GateTimeout,
	}
}

// checkEnv refuses a person's input in env that is neither empty nor the recorded value. The
// policy hash is the one exception to "or empty" only in that an empty one is allowed when the
// person pinned a key instead.
func (s *Session) checkEnv(env []string) []Reason {
	want := s.sessionEnv()
	var out []Reason
	for _, e := range env {
		name, value, _ := strings.Cut(e, "=")
		w, ok := want[name]
		if !ok || value == "" || value == w {
			continue
		}
		out = append(out, Reason{Field: "process.env[" + name + "]", Want: fmt.Sprintf("%q (the session's) or empty", w), Got: fmt.Sprintf("%q", clip(value))})
	}
	return out
}
