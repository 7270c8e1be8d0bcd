// Package exit is export and import (docs/exit.md). Export takes what a running stack holds that
// a person may want elsewhere (the policy, the sealed secrets, the audit logs and whether they
// verify) into one bundle (host/bundle), the secrets re-sealed by kms to a recipient key the
// person made; Import restores a bundle's files and, for a new stack, re-seals its secrets to
// that stack's kms. No secret is ever written in the clear: kms re-seals inside itself, and
// Import opens each secret in memory only to seal it again at once.
//
// What it does not guarantee: Go cannot promise that an opened secret leaves no copy in memory
// (it is cleared as soon as it is sealed again); the new kms is found through its logs, so
// Import seals to whichever kms the engine shows serving the expected policy; and a bundle's
// audit/verify.json is the verdict when exported, which Import restores as it is.
package exit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/host/bundle"
	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/host/record"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Audit is audit/verify.json: the audit logs' verification when they were exported.
type Audit struct {
	OK            bool            `json:"ok"`
	Policy        string          `json:"policy"`
	SessionCA     string          `json:"session_ca,omitempty"`
	SessionCAFrom string          `json:"session_ca_from,omitempty"`
	Running       bool            `json:"running"`         // verified as a running stack's: an unsigned tail is a notice
	Error         string          `json:"error,omitempty"` // why the logs could not be verified at all
	Logs          []record.Result `json:"logs"`
	VerifiedAt    string          `json:"verified_at"`
}

// Export is an export of a running stack.
type Export struct {
	Stack     stack.Project      // the running stack: its engine, name, the policy it runs, and where progress goes
	Manifest  string             // the path of Stack.Policy's manifest, whose files go into the bundle
	Recipient *seal.Bundle       // the person's recipient key the secrets are re-sealed to (IsRecipient)
	Operator  ed25519.PrivateKey // signs kms's order and the bundle
	Secrets   []string           // the secrets to export; none: every one kms holds
	Timeout   time.Duration      // how long kms may take to carry out the order
	Poll      time.Duration      // how often to look for kms's answer
}

// Exported is what Export made: the bundle's bytes, its manifest, and the verdict on its logs.
type Exported struct {
	Data   []byte
	Header bundle.Header
	Audit  Audit
}

// Run has the stack's kms re-seal the secrets to the recipient through an operator order,
// copies and verifies the audit logs of the stack's volumes, and makes the bundle. Logs that do
// not verify are in the result (Audit), not an error: the bundle keeps the evidence either way.
func (e Export) Run(ctx context.Context) (*Exported, error) {
	m := e.Stack.Policy
	parts, err := bundle.PolicyParts(e.Manifest, m)
	if err != nil {
		return nil, err
	}
	var kmsName string
	for _, c := range m.Components {
		if c.Kind == pbp.KindKMS {
			kmsName = c.Name
		}
	}
	if kmsName == "" {
		return nil, fmt.Errorf("the policy %s has no kms: there is nothing to export secrets from", m.Hash)
	}
	q := kms.SealToOrder{Names: e.Secrets, All: len(e.Secrets) == 0, Recipient: e.Recipient}
	ans, orderID, err := e.orderSealTo(ctx, kmsName, q)
	if err != nil {
		return nil, err
	}
	h := bundle.Header{V: 1, Kind: bundle.Kind, Created: time.Now().UTC().Format(time.RFC3339), Project: e.Stack.Name, PolicyHash: m.Hash,
		KMS: ans.KMS.Fingerprint(), Recipient: e.Recipient.Fingerprint(), Order: orderID, Secrets: []string{}}
	for _, s := range ans.Sealed {
		if s.To() != e.Recipient.Fingerprint() {
			return nil, refused{fmt.Errorf("kms answered secret %s sealed to %s, not to the recipient %s", s.Name(), s.To(), e.Recipient.Fingerprint())}
		}
		parts["secrets/"+s.Name()+".sealed"] = s.Marshal()
		h.Secrets = append(h.Secrets, s.Name())
	}
	slices.Sort(h.Secrets)
	if len(e.Secrets) > 0 && !slices.Equal(h.Secrets, slices.Sorted(slices.Values(e.Secrets))) {
		return nil, refused{fmt.Errorf("kms re-sealed %v, the order named %v", h.Secrets, e.Secrets)}
	}
	if len(h.Secrets) == 0 {
		fmt.Fprintln(e.Stack.Progress, "warning: kms holds no sealed secret: the bundle has none")
	}
	verified, err := e.logs(ctx, parts)
	if err != nil {
		return nil, err
	}
	h.AuditOK = verified.OK
	data, err := bundle.Marshal(h, parts, e.Operator)
	if err != nil {
		return nil, err
	}
	return &Exported{Data: data, Header: h, Audit: verified}, nil
}

// orderSealTo has the stack's kms re-seal secrets: it signs the order into kms's gate volume,
// waits for the answer, and checks that kms runs the stack's policy.
func (e Export) orderSealTo(ctx context.Context, kmsName string, q kms.SealToOrder) (kms.OrderAnswer, string, error) {
	policy := e.Stack.Policy.Hash
	volume := e.Stack.Name + "_gate-" + kmsName // compile.GateVolume, as compose prefixes it
	dir, err := e.Stack.Engine.VolumeMountpoint(ctx, volume)
	if ee := (*engine.Error)(nil); errors.As(err, &ee) {
		return kms.OrderAnswer{}, "", refused{fmt.Errorf("kms's gate volume: %w (is the stack up, with SHARNESS_AI_OPERATOR_PUBKEY?)", err)}
	} else if err != nil {
		return kms.OrderAnswer{}, "", err
	}
	o, err := gate.PlaceOrder(dir, gate.Order{Component: kmsName, Op: kms.OrderSealTo, Policy: policy, Args: q.Args()}, e.Operator, e.Timeout)
	if errors.Is(err, fs.ErrPermission) {
		return kms.OrderAnswer{}, "", fmt.Errorf("%w (Docker volumes are root's: run as root)", err)
	} else if err != nil {
		return kms.OrderAnswer{}, "", refused{err}
	}
	defer gate.Withdraw(dir, o.ID) // answered, or given up: kms must not carry it out later
	fmt.Fprintf(e.Stack.Progress, "order %s placed in %s; waiting for kms (up to %s)\n", o.ID, dir, e.Timeout)
	deadline := time.Now().Add(e.Timeout)
	var r gate.Result
	for {
		if r, err = gate.ReadResult(dir, o.ID); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return kms.OrderAnswer{}, "", refused{err}
		}
		if time.Now().After(deadline) {
			return kms.OrderAnswer{}, "", refused{fmt.Errorf("kms did not answer order %s within %s (is kms running with the operator's public key?)", o.ID, e.Timeout)}
		}
		select {
		case <-ctx.Done():
			return kms.OrderAnswer{}, "", ctx.Err()
		case <-time.After(e.Poll):
		}
	}
	if !r.Done() {
		return kms.OrderAnswer{}, "", refused{fmt.Errorf("kms refused order %s: %s: %s", o.ID, r.Reason, r.Message)}
	}
	ans, err := kms.ParseOrderAnswer(r.Output)
	switch {
	case err != nil:
		return kms.OrderAnswer{}, "", refused{err}
	case r.Component != kmsName:
		return kms.OrderAnswer{}, "", refused{fmt.Errorf("the answer to order %s is from %q, not %s", o.ID, r.Component, kmsName)}
	case ans.KMS.PolicyHash() != policy:
		return kms.OrderAnswer{}, "", refused{fmt.Errorf("the running kms serves policy %s, not %s", ans.KMS.PolicyHash(), policy)}
	}
	return ans, o.ID, nil
}

// logs copies the audit logs of the stack's volumes into parts, up to each one's last whole line
// (a running component may be writing one), and verifies the copies, as `audit verify --project
// --allow-running` would, into audit/verify.json.
func (e Export) logs(ctx context.Context, parts map[string][]byte) (Audit, error) {
	v := Audit{Policy: e.Stack.Policy.Hash, Running: true, Logs: []record.Result{}, VerifiedAt: time.Now().UTC().Format(time.RFC3339)}
	logs, err := record.ProjectLogs(ctx, e.Stack)
	if err != nil {
		return v, refused{err}
	}
	tmp, err := os.MkdirTemp("", "sharness-export-")
	if err != nil {
		return v, err
	}
	defer os.RemoveAll(tmp)
	var copies []record.Log
	for _, l := range logs {
		dst := filepath.Join(tmp, l.Component+".jsonl")
		copies = append(copies, record.Log{File: dst, Component: l.Component})
		data, err := os.ReadFile(l.File)
		if errors.Is(err, fs.ErrNotExist) {
			continue // record.Scan says the volume has no log
		} else if errors.Is(err, fs.ErrPermission) {
			return v, fmt.Errorf("%w (Docker volumes are root's: run as root)", err)
		} else if err != nil {
			return v, err
		}
		if i := strings.LastIndexByte(string(data), '\n'); i >= 0 {
			data = data[:i+1]
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			return v, err
		}
		parts["audit/"+l.Component+".jsonl"] = data
	}
	ca, file, err := record.SessionCA(e.Stack.Name, copies)
	if err == nil {
		tr := audit.Trust{CA: ca, Policy: v.Policy, AllowRunning: true, FinalSeq: map[string]uint64{}}
		v.SessionCA, v.SessionCAFrom = audit.CAHash(ca), strings.ReplaceAll("the session record in "+file, tmp, "audit")
		v.Logs, err = record.Scan(copies, &tr, func(string, audit.Entry) {})
	}
	if err != nil {
		v.Error = err.Error()
	}
	v.OK = err == nil
	for i := range v.Logs {
		v.Logs[i].File = "audit/" + filepath.Base(v.Logs[i].File)
		v.OK = v.OK && v.Logs[i].OK
	}
	parts[bundle.VerifyPath], _ = json.MarshalIndent(v, "", "  ")
	return v, nil
}

// Import is an import of a bundle.
type Import struct {
	Bundle     *bundle.Bundle
	Key        hpke.PrivateKey // the recipient key the bundle's secrets are sealed to
	Into       string          // the folder to restore the bundle's files into
	Stack      stack.Project   // the new stack whose kms the secrets are sealed to; Name "": none
	Wait       time.Duration   // how long to look for the new kms's bundle
	Policy     string          // the policy the new kms must serve ("": the bundle's)
	SignKey    string          // the file of an Ed25519 key to sign the re-sealed secrets with ("": unsigned)
	SecretsDir string          // where the re-sealed secrets go
}

// Imported is what Import did.
type Imported struct {
	Secrets  int          // the sealed secrets the bundle holds
	KMS      *seal.Bundle // the new stack's kms; nil without one
	ReSealed int          // the secrets sealed to it
}

// Run checks that the bundle's secrets are sealed to the recipient key, re-seals them to the
// new stack's kms if there is one, restores the bundle's files, and writes the re-sealed secrets.
func (i Import) Run(ctx context.Context) (*Imported, error) {
	sealed, err := i.Bundle.Sealed(seal.Fingerprint(i.Key.PublicKey()))
	if err != nil {
		return nil, err
	}
	res := &Imported{Secrets: len(sealed)}
	var reSealed map[string][]byte
	if i.Stack.Name != "" {
		if !stack.IsProject(i.Stack.Name) {
			return nil, fmt.Errorf("--project %q is not a compose project name", i.Stack.Name)
		}
		to, err := i.Stack.KMSBundle(ctx, i.Wait)
		if err != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("the kms of %s: %w", i.Stack.Name, err)
		} else if err != nil {
			return nil, err
		}
		if want := cmp.Or(i.Policy, i.Bundle.Header().PolicyHash); to.PolicyHash() != want {
			return nil, refused{fmt.Errorf("the kms of %s serves policy %s, not %s: refusing to seal to it (--policy-hash names another)", i.Stack.Name, to.PolicyHash(), want)}
		}
		if reSealed, err = reseal(sealed, i.Key, to, i.SignKey); err != nil {
			return nil, refused{err}
		}
		res.KMS, res.ReSealed = to, len(reSealed)
	}
	if err := i.Bundle.Restore(i.Into); err != nil {
		return nil, err
	}
	if i.Stack.Name != "" {
		if err := artefact.Write(i.SecretsDir, reSealed); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// reseal opens each secret with the recipient key, in memory only, and seals it at once to the
// kms of to, under its own name and expiry; the opened bytes are scrubbed as soon as sealed.
func reseal(sealed []*seal.Sealed, k hpke.PrivateKey, to *seal.Bundle, signKey string) (map[string][]byte, error) {
	var signer ed25519.PrivateKey
	if signKey != "" {
		data, err := os.ReadFile(signKey)
		if err != nil {
			return nil, fmt.Errorf("read --sign-key: %w", err)
		}
		if signer, err = keys.ParsePrivate(data); err != nil {
			return nil, fmt.Errorf("%s: %w", signKey, err)
		}
	}
	out := map[string][]byte{}
	now := time.Now()
	for _, s := range sealed {
		if !now.Before(s.Expires()) {
			return nil, fmt.Errorf("secret %s expired at %s: seal it anew with `sharness-ai secret seal`", s.Name(), s.Expires().Format(time.RFC3339))
		}
		secret, err := seal.Open(k, s)
		if err != nil {
			return nil, err
		}
		ns, err := seal.Seal(to.Key(), s.Name(), secret, s.Expires(), signer)
		clear(secret)
		if err != nil {
			return nil, err
		}
		out[s.Name()+".sealed"] = ns.Marshal()
	}
	return out, nil
}

// refused marks an error as a failed check (sharness-ai exits 1) rather than bad input (2).
type refused struct{ error }

func (r refused) Unwrap() error { return r.error }

// Refused says the error is a failed check.
func (refused) Refused() bool { return true }
