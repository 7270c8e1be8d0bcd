package custody

import (
	"context"
	"crypto/hpke"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Asker puts an action to the operator and waits for the decision (*gate.Gate).
type Asker interface {
	Ask(ctx context.Context, action string, canonical []byte, summary string) (gate.Verdict, error)
}

// Tiers is kms's gate policy: each caller's seal_to needs its own approval (docs/gate.md, kms).
var Tiers = map[string]gate.Tier{kms.ActionSealTo: gate.Every}

// heldUse is the session for a seal_to's Decide: the opening is counted against max_unwraps only
// once the operator approved, so a denied seal_to uses none.
type heldUse struct {
	*session
	asked bool
	max   int
}

func (h *heldUse) TakeUse(max int) bool { h.asked, h.max = true, max; return true }

// sealTo decides a caller's seal_to, puts it to the operator, and re-seals once approved. The
// lock is not held while the person decides: a destroy meanwhile wins, and the re-seal is refused.
func (s *Server) sealTo(ctx context.Context, w http.ResponseWriter, c kms.Call) ([]byte, *kms.Refusal) {
	held := &heldUse{session: (*session)(s)}
	s.mu.RLock()
	f, ref := kms.Decide(s.rules, c, s.cfg.Now(), held)
	s.mu.RUnlock()
	if ref != nil {
		return nil, ref
	}
	q := c.Request
	v, err := gate.Verdict{}, fmt.Errorf("no gate")
	if s.cfg.Gate != nil {
		// The request stays open until the operator decides; the gate's timeout bounds the wait.
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Time{})
		rc.SetWriteDeadline(time.Time{})
		v, err = s.cfg.Gate.Ask(ctx, kms.ActionSealTo, kms.SealToCanonical(c.Caller, q), kms.SealToSummary(c.Caller, q))
	}
	if !v.Approved() {
		reason := v.Reason()
		if s.cfg.Gate == nil {
			reason = gate.ReasonUnavailable
		}
		s.cfg.Log.Info("kms seal_to not approved", "caller", c.Caller, "name", q.Name, "to", q.Recipient.Fingerprint(), "reason", reason, "error", fmt.Sprint(err))
		return nil, kms.RefuseApproval(reason)
	}
	if held.asked && !(*session)(s).TakeUse(held.max) {
		return nil, kms.Refuse(kms.ReasonLimit, "this session's %d openings are used (business.kms.max_unwraps)", held.max)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.destroyed {
		return nil, kms.Refuse(kms.ReasonDestroyed, "the kms identity was destroyed")
	}
	out, ref := s.reseal(f, q.Recipient.Key(), q.Expires)
	if ref != nil {
		return nil, ref
	}
	return out.Marshal(), nil
}

// reseal opens f and seals it to the identity to, until expires. Under the read lock.
func (s *Server) reseal(f *seal.Sealed, to hpke.PublicKey, expires time.Time) (*seal.Sealed, *kms.Refusal) {
	secret, release, ref := s.open(f)
	if ref != nil {
		return nil, ref
	}
	defer release()
	out, err := seal.Seal(to, f.Name(), secret, expires, nil)
	if err != nil {
		return nil, kms.Refuse(kms.ReasonInternal, "re-seal %s", f.Name())
	}
	return out, nil
}

// Order carries out an operator's order that the gate checked and spent (gate.Execute): a
// seal_to of the named secrets, or of all of them, to the order's recipient, each keeping its
// own expiry. It is all or nothing: the first secret that kms may not or cannot re-seal refuses
// the order, naming it. Each re-seal is audited; the order's outcome is audited by RecordOrder.
func (s *Server) Order(_ context.Context, o gate.Order) (output, reason, message string) {
	if o.Op != kms.OrderSealTo {
		return "", kms.ReasonOp, fmt.Sprintf("kms carries out no order %q, only %s", o.Op, kms.OrderSealTo)
	}
	q, err := kms.ParseSealToOrder(o.Args)
	if err != nil {
		return "", kms.ReasonBadRequest, err.Error()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.destroyed {
		return "", kms.ReasonDestroyed, "the kms identity was destroyed"
	}
	names := q.Names
	if q.All {
		if names, err = s.sealedNames(); err != nil {
			s.cfg.Log.Error("list sealed secrets", "error", err.Error())
			return "", kms.ReasonInternal, "the sealed secrets cannot be listed"
		}
	}
	now := s.cfg.Now()
	var files []*seal.Sealed
	for _, name := range names {
		f, ref := (*session)(s).Load(name)
		if ref == nil {
			ref = kms.CheckFile(s.rules, name, f, now)
		}
		var out *seal.Sealed
		if ref == nil {
			out, ref = s.reseal(f, q.Recipient.Key(), f.Expires())
		}
		if ref != nil {
			return "", ref.Type, ref.Message
		}
		files = append(files, out)
	}
	for _, f := range files {
		s.cfg.Audit.Record(s.cfg.Log, audit.Event{Action: "seal_to", Decision: "allow", Reason: "operator order", Caller: "operator",
			Destination: f.Name(), Fields: map[string]string{"order": o.ID, "to": f.To()}})
	}
	return kms.OrderAnswer{KMS: s.bundle, Sealed: files}.Marshal(), "", ""
}

// RecordOrder audits an order's outcome, carried out or refused (forged, expired, replayed,
// malformed, or refused by Order).
func (s *Server) RecordOrder(r gate.Result) {
	e := audit.Event{Action: "order", Decision: "allow", Caller: "operator", Destination: r.Op, Fields: map[string]string{"order": r.ID}}
	if !r.Done() {
		e.Decision, e.Reason = "deny", r.Reason
	}
	s.cfg.Audit.Record(s.cfg.Log, e)
}

// sealedNames lists the secrets of the secrets folder: its <name>.sealed files, sorted.
func (s *Server) sealedNames() ([]string, error) {
	entries, err := os.ReadDir(s.cfg.SecretsDir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".sealed"); ok && pbp.SecretName(name) && e.Type().IsRegular() {
			names = append(names, name)
		}
	}
	if len(names) > kms.MaxOrderSecrets {
		return nil, fmt.Errorf("%d sealed secrets, an order takes at most %d", len(names), kms.MaxOrderSecrets)
	}
	slices.Sort(names)
	return names, nil
}
