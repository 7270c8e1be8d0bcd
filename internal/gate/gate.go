// Package gate holds actions that a policy marks as needing a person until the operator on the
// host decides them (docs/gate.md). It has no network endpoint: each gated component has
// its own gate directory (a volume mounted into that component only), writes a pending request
// there, and waits for a decision file that the host CLI (`sharness-ai approve|deny`) signs with
// the operator's Ed25519 key and writes next to it. The component checks the decision against
// the operator's pinned public key and the exact request it holds (Check): bound to every field,
// single use (a spent-approval record in the directory survives restarts), time-limited.
//
// Tiers (per action, the component's policy): auto asks nobody; once lets the operator approve
// one request or, with a session approval, every identical request (same action and digest)
// until the approval expires; every needs a fresh approval for each request.
//
// What it does not guarantee:
//   - That a person decided: whoever holds the operator key and can write the gate directory
//     (root on the host) approves. The key file's mode is checked, not who reads it.
//   - That the digest means what the summary says: the component computes both, and the gate
//     trusts the component to carry out exactly the canonical bytes it asked about. The summary
//     is cleaned for a terminal, not verified.
//   - Isolation from the agent: that comes from mounting each gate directory into its component
//     only (for bash, into the server and never into the sandboxed shell).
//   - Replay protection across a clock set back by more than Skew: spent approvals are forgotten
//     once expired, and an expired token becomes valid again under such a clock.
//   - Liveness: a request no one decides times out as a denial; session approvals live in the
//     component's memory and end with it. A decision written just as its request times out is
//     left behind until the component restarts, and is useless (its request id is gone).
package gate

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Tier is how a policy gates an action.
type Tier string

const (
	Auto  Tier = "auto"  // no request at all: the action goes ahead
	Once  Tier = "once"  // each request is approved, alone or by a session approval
	Every Tier = "every" // each request needs its own approval; session approvals are refused
)

// Defaults of a Config.
const (
	DefaultTimeout = 5 * time.Minute
	DefaultPoll    = 200 * time.Millisecond
)

// Config is a component's gate.
type Config struct {
	Dir       string            // the component's gate directory
	Component string            // the component's name, bound into every approval
	Policy    string            // the hash of the policy it enforces, bound into every approval
	Operator  ed25519.PublicKey // the pinned operator key (ParsePublicKey)
	Tiers     map[string]Tier   // action → tier; an action not listed is Every
	Timeout   time.Duration     // how long a request waits for a decision; 0 is DefaultTimeout
	Poll      time.Duration     // how often it looks for one; 0 is DefaultPoll
	Log       *slog.Logger      // one line per decision; nil logs nothing
}

// Gate is a component's side of the gate. It is safe for concurrent use.
type Gate struct {
	cfg      Config
	root     *os.Root
	used     *Set
	mu       sync.Mutex
	sessions map[[2]string]time.Time // {action, digest} → not_after of a session approval
}

// Open prepares cfg.Dir: requests and decisions left by a previous run are removed (nobody waits
// for them any more), and the spent approvals are loaded.
func Open(cfg Config) (*Gate, error) {
	switch {
	case !namePattern.MatchString(cfg.Component):
		return nil, fmt.Errorf("gate: component %q is not a lower-case name", cfg.Component)
	case !digestPattern.MatchString(cfg.Policy):
		return nil, fmt.Errorf("gate: policy %q is not sha256:<hex>", cfg.Policy)
	case len(cfg.Operator) != ed25519.PublicKeySize:
		return nil, errors.New("gate: no operator public key")
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.Poll = orDefault(cfg.Poll, DefaultPoll)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	root, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	for _, d := range []string{"pending", "decisions"} {
		if err := root.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("gate: clear %s: %w", d, err)
		}
		if err := root.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
	}
	used, err := OpenSet(cfg.Dir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	return &Gate{cfg: cfg, root: root, used: used, sessions: map[[2]string]time.Time{}}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Ask decides action on canonical, the canonical bytes of the exact request the component will
// carry out, asking the operator unless its tier is auto or a session approval covers it.
// summary is shown to the operator: a short text, never secret material. The error is nil for
// an approval or a signed denial, and names the cause of any other denial for the log.
//
// A nil Gate is a component without one (Settings.Open): it refuses everything with
// approval_unavailable.
func (g *Gate) Ask(ctx context.Context, action string, canonical []byte, summary string) (Verdict, error) {
	if g == nil {
		return Verdict{reason: ReasonUnavailable}, errors.New("gate: none (no operator key or no gate folder)")
	}
	sum := sha256.Sum256(canonical)
	now := time.Now().UTC().Truncate(time.Second)
	r := Request{ID: rand.Text(), Component: g.cfg.Component, Action: action, Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Summary: cleanSummary(summary), Policy: g.cfg.Policy, Tier: g.cfg.Tiers[action], Created: now, Expires: now.Add(g.cfg.Timeout)}
	if r.Tier != Auto && r.Tier != Once {
		r.Tier = Every
	}
	var v Verdict
	var err error
	switch {
	case !namePattern.MatchString(action):
		v, err = Verdict{reason: ReasonUnavailable}, fmt.Errorf("gate: action %q is not a lower-case name", action)
	case r.Tier == Auto:
		v = Verdict{approved: true, reason: ReasonAuto}
	case r.Tier == Once && g.session(action, r.Digest):
		v = Verdict{approved: true, reason: ReasonSession}
	default:
		v, err = g.wait(ctx, r)
		v.id = r.ID
	}
	g.cfg.Log.Info("gate", "component", r.Component, "action", action, "id", r.ID, "digest", r.Digest,
		"tier", r.Tier, "approved", v.Approved(), "reason", v.Reason(), "error", err)
	return v, err
}

// session reports whether a live session approval covers action on digest.
func (g *Gate) session(action, digest string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.sessions[[2]string{action, digest}]
	if ok && !time.Now().Before(until) {
		delete(g.sessions, [2]string{action, digest})
		return false
	}
	return ok
}

// wait writes r for the operator and waits for a decision, r's expiry or ctx. A session
// approval of an identical request, given while r waits, covers r too (a client that opened
// several identical connections at once is answered by one `approve --session`).
func (g *Gate) wait(ctx context.Context, r Request) (Verdict, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = writeFile(g.root, pendingFile(r.ID), append(data, '\n'), 0o644, false)
	}
	if err != nil {
		return Verdict{reason: ReasonUnavailable}, fmt.Errorf("gate: write request: %w", err)
	}
	defer g.root.Remove(decisionFile(r.ID))
	defer g.root.Remove(pendingFile(r.ID)) // first: the host sees no request without a decision slot
	ctx, cancel := context.WithDeadline(ctx, r.Expires)
	defer cancel()
	tick := time.NewTicker(g.cfg.Poll)
	defer tick.Stop()
	for {
		token, err := readFile(g.root, decisionFile(r.ID), MaxToken)
		switch {
		case err == nil:
			return g.decide(token, r)
		case !errors.Is(err, fs.ErrNotExist):
			return Verdict{reason: ReasonInvalid}, fmt.Errorf("gate: read decision: %w", err)
		case r.Tier == Once && g.session(r.Action, r.Digest):
			return Verdict{approved: true, reason: ReasonSession}, nil
		}
		select {
		case <-ctx.Done():
			return Verdict{reason: ReasonTimeout}, fmt.Errorf("gate: no decision on request %s: %w", r.ID, ctx.Err())
		case <-tick.C:
		}
	}
}

// decide checks a decision for r and spends an approval.
func (g *Gate) decide(token []byte, r Request) (Verdict, error) {
	v, err := Check(token, g.cfg.Operator, r, time.Now(), g.used)
	if err != nil || !v.approved {
		return v, err
	}
	if err := g.used.Add(v.c.NotAfter, v.c.ID, v.c.Nonce); errors.Is(err, errReplayed) {
		return Verdict{reason: ReasonReplayed}, fmt.Errorf("gate: %w", err)
	} else if err != nil {
		return Verdict{reason: ReasonUnavailable}, fmt.Errorf("gate: %w", err)
	}
	if v.c.Tier == ScopeSession {
		g.mu.Lock()
		g.sessions[[2]string{r.Action, r.Digest}] = v.c.NotAfter
		g.mu.Unlock()
	}
	return v, nil
}
