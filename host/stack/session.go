package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sharness-ai/sharness/host/shim"
)

// Inputs the compose file interpolates that the session record fixes (compose/render.go).
const (
	EnvWorkspace   = "SHARNESS_AI_WORKSPACE"
	EnvSecretsDir  = "SHARNESS_AI_SECRETS_DIR"
	EnvOperatorKey = "SHARNESS_AI_OPERATOR_PUBKEY"
	EnvGateTimeout = "SHARNESS_AI_GATE_TIMEOUT"
	EnvPolicyKey   = "SHARNESS_AI_POLICY_KEY"
)

// SessionInputs are what the person names when starting a stack: the folders and their own
// inputs to the components. Empty folders take the compose file's defaults, relative to base
// (the compose file's folder): ./workspace and ./secrets.
type SessionInputs struct {
	Project, Policy, Manifest string // the manifest file; its folder is the one mounted
	Workspace, Secrets, Base  string
	OperatorKey, GateTimeout  string
	PolicyKey                 string
}

// SessionInputsFromEnv fills in what the environment says, as compose would read it.
func SessionInputsFromEnv(in SessionInputs, getenv func(string) string) SessionInputs {
	if in.Workspace == "" {
		in.Workspace = getenv(EnvWorkspace)
	}
	if in.Secrets == "" {
		in.Secrets = getenv(EnvSecretsDir)
	}
	if in.OperatorKey == "" {
		in.OperatorKey = getenv(EnvOperatorKey)
	}
	if in.GateTimeout == "" {
		in.GateTimeout = getenv(EnvGateTimeout)
	}
	if in.PolicyKey == "" {
		in.PolicyKey = getenv(EnvPolicyKey)
	}
	return in
}

// NewSession is the record of in: every folder absolute and without symbolic links (as the
// runtime shim will resolve the binds), each of which must exist.
func NewSession(in SessionInputs) (shim.Session, error) {
	s := shim.Session{Project: in.Project, Policy: in.Policy, PolicyKey: in.PolicyKey, OperatorKey: in.OperatorKey, GateTimeout: in.GateTimeout}
	var err error
	if s.Workspace, err = realDir(in.Workspace, filepath.Join(in.Base, "workspace"), "workspace"); err != nil {
		return s, err
	}
	if s.Manifest, err = realDir(filepath.Dir(in.Manifest), "", "manifest folder"); err != nil {
		return s, err
	}
	secrets := in.Secrets
	if secrets == "" {
		secrets = filepath.Join(in.Base, "secrets")
	}
	if s.Secrets, err = realDir(secrets, "", "secrets folder"); err != nil {
		// Not made yet (compose, or the first `sharness-ai secret seal`, makes it): its parent
		// must be real.
		parent, perr := realDir(filepath.Dir(secrets), "", "secrets folder's parent")
		if perr != nil {
			return s, err
		}
		s.Secrets = filepath.Join(parent, filepath.Base(secrets))
	}
	return s, s.Valid()
}

// realDir is dir (or def when dir is ""), absolute and with every symbolic link resolved.
func realDir(dir, def, what string) (string, error) {
	if dir == "" {
		dir = def
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("session: %s %s: %w", what, dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("session: %s: %w", what, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("session: %s %s is not a folder", what, real)
	}
	return real, nil
}

// SessionsDir is where the runtime shim reads session records when the policies are under root.
func SessionsDir(root string) string { return filepath.Join(filepath.Dir(root), "sessions") }

// RecordSession writes s as its project's record in dir (SessionsDir), whole, root's 0644 in a
// 0755 folder. Only root may write there, which is the point: refuse to run otherwise.
func RecordSession(dir string, s shim.Session) (string, error) {
	if err := s.Valid(); err != nil {
		return "", err
	}
	path := shim.SessionPath(dir, s.Project)
	if path == "" {
		return "", fmt.Errorf("session: %q is not a compose project name", s.Project)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("session: the record %s must be root's (the runtime shim trusts nothing else): run as root", path)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	data, err := marshalSession(s)
	if err != nil {
		return "", err
	}
	if err := writeRootFile(path, data); err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	return path, nil
}

// SessionEnv is what compose must be given so that it interpolates the recorded values, and not ones a
// .env file or another variable would choose.
func SessionEnv(s shim.Session) []string {
	env := []string{EnvWorkspace + "=" + s.Workspace, EnvOperatorKey + "=" + s.OperatorKey, EnvGateTimeout + "=" + s.GateTimeout,
		EnvPolicyKey + "=" + s.PolicyKey}
	if s.Secrets != "" {
		env = append(env, EnvSecretsDir+"="+s.Secrets)
	}
	return env
}

func marshalSession(s shim.Session) ([]byte, error) {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	if _, err := shim.ParseSession(data); err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
