package gate

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Where a gated component (fs, bash, net, kms) finds its gate. The compose file mounts the
// component's own gate volume at DefaultDir and passes the operator's public key; flags override
// the environment.
const (
	DefaultDir  = "/var/lib/sharness/gate" // compile.GateDir (a test holds them equal)
	DefaultWait = 2 * time.Minute          // how long a request waits for the operator
	EnvDir      = "SHARNESS_AI_GATE_DIR"
	EnvTimeout  = "SHARNESS_AI_GATE_TIMEOUT"
	EnvOperator = "SHARNESS_AI_OPERATOR_PUBKEY" // "ed25519:<base64>" or PEM; `sharness-ai operator init` prints it
)

// Settings are a component's gate folder, request timeout and operator key, before Open.
type Settings struct {
	Dir      string // the component's gate folder
	Timeout  string // how long a request waits for a decision, as time.ParseDuration reads it
	Operator string // the operator's public key in a form ParsePublicKey reads; "" for none
}

// Flags registers -gate-dir and -gate-timeout on f, defaulting to EnvDir and EnvTimeout, then to
// DefaultDir and DefaultWait, and reads the operator's key from EnvOperator alone.
func (s *Settings) Flags(f *flag.FlagSet, getenv func(string) string) {
	f.StringVar(&s.Dir, "gate-dir", cmp.Or(getenv(EnvDir), DefaultDir), "the approval gate's folder, this component's own volume (env "+EnvDir+")")
	f.StringVar(&s.Timeout, "gate-timeout", cmp.Or(getenv(EnvTimeout), DefaultWait.String()), "how long an action that needs a person waits for the operator (env "+EnvTimeout+")")
	s.Operator = getenv(EnvOperator)
}

// Open opens the gate of cfg in s.Dir, pinning s.Operator, each request waiting s.Timeout
// (cfg's Dir, Operator and Timeout are set from s). Without an operator key or without the
// folder it returns a nil Gate, whose Ask refuses everything with approval_unavailable, and,
// when needs is not "" (what the component's policy puts to the gate: "the admin profile"),
// logs a warning on cfg.Log saying what is missing and what is refused. A timeout that is not a
// positive duration, a key that does not parse, or a folder the gate cannot use is an error:
// the component must not start.
func (s Settings) Open(cfg Config, needs string) (*Gate, error) {
	timeout, err := time.ParseDuration(cmp.Or(s.Timeout, DefaultWait.String()))
	if err != nil || timeout <= 0 {
		return nil, fmt.Errorf("gate timeout %q is not a positive duration such as 2m", s.Timeout)
	}
	var missing []string
	if strings.TrimSpace(s.Operator) == "" {
		missing = append(missing, "no operator public key ("+EnvOperator+")")
	}
	if _, err := os.Stat(s.Dir); errors.Is(err, fs.ErrNotExist) {
		missing = append(missing, "no gate folder "+s.Dir)
	}
	if len(missing) > 0 {
		if needs != "" && cfg.Log != nil {
			cfg.Log.Warn("no approval gate: "+needs+" is refused (approval_unavailable)", "component", cfg.Component,
				"missing", strings.Join(missing, ", "))
		}
		return nil, nil
	}
	if cfg.Operator, err = ParsePublicKey([]byte(s.Operator)); err != nil {
		return nil, fmt.Errorf("operator public key (%s): %w", EnvOperator, err)
	}
	cfg.Dir, cfg.Timeout = s.Dir, timeout
	return Open(cfg)
}

// Text is a public sentence saying what a refusal's reason means, for the agent.
func (r Reason) Text() string {
	switch r {
	case ReasonDenied:
		return "the operator denied it"
	case ReasonTimeout:
		return "no decision came in time"
	case ReasonUnavailable:
		return "nobody can be asked (no operator key or no gate folder), or the gate failed"
	case ReasonApproved, ReasonSession, ReasonAuto:
		return "approved"
	}
	return "the decision did not hold (the cause is in the component's log)"
}
