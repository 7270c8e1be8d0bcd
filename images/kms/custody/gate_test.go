package custody

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

var (
	operatorKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	intruderKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32))
)

// withGate gives kms a real gate in a fresh folder, with seal_to at the given tier; it returns
// the folder through dir.
func withGate(t testing.TB, tier gate.Tier, timeout time.Duration, dir *string) func(*Config) {
	return func(c *Config) {
		d := t.TempDir()
		g, err := gate.Open(gate.Config{Dir: d, Component: c.Self, Policy: c.Manifest.Hash, Operator: operatorKey.Public().(ed25519.PublicKey),
			Tiers: map[string]gate.Tier{kms.ActionSealTo: tier}, Timeout: timeout, Poll: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.Gate = g
		if dir != nil {
			*dir = d
		}
	}
}

// autoGate is a gate that asks nobody about seal_to, for the tests of seal_to's other rules.
func autoGate(t testing.TB) func(*Config) { return withGate(t, gate.Auto, 0, nil) }

// decide plays the person on the host: it waits for one request in dir and decides it.
func decide(dir string, d gate.Decision) <-chan gate.Request {
	ch := make(chan gate.Request, 1)
	go func() {
		defer close(ch)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if reqs, err := gate.List(dir); err == nil && len(reqs) > 0 {
				if _, err := gate.Decide(dir, reqs[0].ID, d, operatorKey, gate.ScopeOnce, 0); err == nil {
					ch <- reqs[0]
				}
				return
			}
		}
	}()
	return ch
}

// TestSealToGate: a caller's seal_to is put to the operator, bound to the exact request, and
// re-seals only once approved; a denial, no decision, or no gate at all refuses it with the
// gate's reason, and a refused seal_to opens nothing and uses none of max_unwraps.
func TestSealToGate(t *testing.T) {
	hour := time.Now().Add(time.Hour).Truncate(time.Second)
	sk, _ := seal.GenerateKey()
	to, _ := seal.NewRecipient(sk.PublicKey(), time.Now())
	rules := &pbp.KMSRules{Ops: ops("unwrap", "seal_to"), MaxUnwraps: intp(1)}

	t.Run("approved", func(t *testing.T) {
		var dir string
		e := newEnv(t, rules, withGate(t, gate.Every, time.Minute, &dir))
		e.put(t, "api-key", "api-key", secretValue, hour, nil)
		asked := decide(dir, gate.Approve)
		f, err := e.client.SealTo(context.Background(), "api-key", to, hour)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := seal.Open(sk, f); err != nil || string(got) != secretValue {
			t.Fatalf("the approved re-seal opens to %q, %v", got, err)
		}
		r := <-asked
		q := &kms.Request{Name: "api-key", Recipient: to, Expires: hour}
		sum := sha256.Sum256(kms.SealToCanonical("llm", q))
		if r.Action != kms.ActionSealTo || r.Tier != gate.Every || r.Digest != "sha256:"+hex.EncodeToString(sum[:]) || r.Component != "kms" {
			t.Errorf("request %+v: want action %s, tier every, the digest of the exact seal_to", r, kms.ActionSealTo)
		}
		for _, want := range []string{"api-key", to.Fingerprint(), "llm"} {
			if !strings.Contains(r.Summary, want) {
				t.Errorf("summary %q does not name %q", r.Summary, want)
			}
		}
		if strings.Contains(r.Summary, secretValue) || strings.Contains(e.logs.String(), secretValue) {
			t.Error("the secret is in the summary or the log")
		}
		var ref *kms.Refusal
		if _, err := e.client.Unwrap(context.Background(), "api-key"); !errors.As(err, &ref) || ref.Type != kms.ReasonLimit {
			t.Errorf("unwrap after an approved seal_to with max_unwraps 1: %v, want %s (the seal_to opened the secret)", err, kms.ReasonLimit)
		}
	})
	for _, tc := range []struct {
		name   string
		edit   func(*Config, *string)
		decide gate.Decision // "" for nobody
		reason gate.Reason
		status int
	}{
		{"denied", func(c *Config, d *string) { withGate(t, gate.Every, time.Minute, d)(c) }, gate.Deny, gate.ReasonDenied, 403},
		{"nobody decides", func(c *Config, d *string) { withGate(t, gate.Every, 300*time.Millisecond, d)(c) }, "", gate.ReasonTimeout, 403},
		{"no gate", func(*Config, *string) {}, "", gate.ReasonUnavailable, 503},
		{"no operator key or folder", func(c *Config, _ *string) { c.Gate = (*gate.Gate)(nil) }, "", gate.ReasonUnavailable, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			e := newEnv(t, rules, func(c *Config) { tc.edit(c, &dir) })
			e.put(t, "api-key", "api-key", secretValue, hour, nil)
			if tc.decide != "" {
				decide(dir, tc.decide)
			}
			var ref *kms.Refusal
			if _, err := e.client.SealTo(context.Background(), "api-key", to, hour); !errors.As(err, &ref) || ref.Type != string(tc.reason) || ref.Status != tc.status {
				t.Fatalf("seal_to: %v, want %s (%d)", err, tc.reason, tc.status)
			}
			if !strings.Contains(e.logs.String(), `"reason":"`+string(tc.reason)+`"`) {
				t.Errorf("the log does not give the reason:\n%s", e.logs.String())
			}
			if got, err := e.client.Unwrap(context.Background(), "api-key"); err != nil || string(got) != secretValue {
				t.Errorf("unwrap after a refused seal_to: %v (the refused seal_to used the one opening)", err)
			}
		})
	}
}

type testIdentity struct {
	*x509svid.SVID
	*x509bundle.Bundle
}

// serveOrders starts e's order loop on a fresh gate folder and gives e an audit log; it returns
// the gate folder and the log's path.
func serveOrders(t *testing.T, e *env) (dir, log string) {
	t.Helper()
	dir, auditDir := t.TempDir(), t.TempDir()
	w, err := audit.OpenComponent(auditDir, testIdentity{e.ca.SVID(t, "kms"), e.ca.Bundle()}, "kms", e.m.Hash)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.cfg.Audit = w
	g, err := gate.Open(gate.Config{Dir: dir, Component: "kms", Policy: e.m.Hash, Operator: operatorKey.Public().(ed25519.PublicKey), Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeOrders(ctx, e.srv.Order, e.srv.RecordOrder) }()
	t.Cleanup(func() {
		cancel()
		<-done
		w.Finish(e.srv.cfg.Log)
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "results")); err == nil {
			return dir, filepath.Join(auditDir, audit.FileName)
		} else if time.Now().After(deadline) {
			t.Fatal("kms made no results folder")
		}
	}
}

// order plays the operator on the host: it places an order and waits for kms's result.
func order(t *testing.T, dir string, key ed25519.PrivateKey, op, args, policy string) gate.Result {
	t.Helper()
	o, err := gate.PlaceOrder(dir, gate.Order{Component: "kms", Op: op, Policy: policy, Args: args}, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		r, err := gate.ReadResult(dir, o.ID)
		if err == nil {
			gate.Withdraw(dir, o.ID)
			return r
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("result of order %s: %v", o.ID, err)
		}
	}
}

// TestOrder: the operator's signed order re-seals the named secrets, or all of them, to the
// recipient, each keeping its expiry, with no seal_to in business.kms.ops; a forged order, an
// order under another policy, another op or malformed args are refused with the reason; every
// order and every re-seal is in kms's audit log, and no secret is.
func TestOrder(t *testing.T) {
	e := newEnv(t, nil, nil) // the fixture's ops: no seal_to for callers
	dir, log := serveOrders(t, e)
	hour := time.Now().Add(time.Hour).Truncate(time.Second)
	e.put(t, "api-key", "api-key", secretValue, hour, nil)
	e.put(t, "db-pass", "db-pass", "hunter2-but-longer", hour.Add(time.Hour), nil)
	sk, _ := seal.GenerateKey()
	to, _ := seal.NewRecipient(sk.PublicKey(), time.Now())
	want := map[string]string{"api-key": secretValue, "db-pass": "hunter2-but-longer"}

	for _, tc := range []struct {
		name  string
		order kms.SealToOrder
		names []string
	}{
		{"all", kms.SealToOrder{All: true, Recipient: to}, []string{"api-key", "db-pass"}},
		{"named", kms.SealToOrder{Names: []string{"db-pass"}, Recipient: to}, []string{"db-pass"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := order(t, dir, operatorKey, kms.OrderSealTo, tc.order.Args(), e.m.Hash)
			if !r.Done() {
				t.Fatalf("order refused: %+v", r)
			}
			a, err := kms.ParseOrderAnswer(r.Output)
			if err != nil {
				t.Fatal(err)
			}
			if a.KMS.Fingerprint() != e.srv.Public().Fingerprint() || a.KMS.PolicyHash() != e.m.Hash {
				t.Errorf("the answer names kms %s under %s", a.KMS.Fingerprint(), a.KMS.PolicyHash())
			}
			var got []string
			for _, f := range a.Sealed {
				got = append(got, f.Name())
				pt, err := seal.Open(sk, f)
				if err != nil || string(pt) != want[f.Name()] || f.To() != to.Fingerprint() {
					t.Errorf("%s opens to %q, %v", f.Name(), pt, err)
				}
				if orig := map[string]time.Time{"api-key": hour, "db-pass": hour.Add(time.Hour)}[f.Name()]; !f.Expires().Equal(orig) {
					t.Errorf("%s expires %s, want its own expiry %s", f.Name(), f.Expires(), orig)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.names, ",") {
				t.Errorf("re-sealed %v, want %v", got, tc.names)
			}
		})
	}
	for _, tc := range []struct {
		name, op, args, policy string
		key                    ed25519.PrivateKey
		reason                 string
	}{
		{"forged", kms.OrderSealTo, kms.SealToOrder{All: true, Recipient: to}.Args(), e.m.Hash, intruderKey, string(gate.ReasonSignature)},
		{"another policy", kms.OrderSealTo, kms.SealToOrder{All: true, Recipient: to}.Args(), "sha256:" + strings.Repeat("0", 64), operatorKey, string(gate.ReasonMismatch)},
		{"another op", "destroy", kms.SealToOrder{All: true, Recipient: to}.Args(), e.m.Hash, operatorKey, kms.ReasonOp},
		{"malformed args", kms.OrderSealTo, `{"v":1,"all":true}`, e.m.Hash, operatorKey, kms.ReasonBadRequest},
		{"unknown secret", kms.OrderSealTo, kms.SealToOrder{Names: []string{"api-key", "nope"}, Recipient: to}.Args(), e.m.Hash, operatorKey, kms.ReasonUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := order(t, dir, tc.key, tc.op, tc.args, tc.policy)
			if r.Reason != tc.reason || r.Output != "" || r.Message == "" {
				t.Errorf("result %+v, want refused with %s and a message", r, tc.reason)
			}
		})
	}
	t.Run("a file sealed to another identity", func(t *testing.T) {
		other, _ := seal.GenerateKey()
		s, _ := seal.Seal(other.PublicKey(), "stale", []byte("x"), hour, nil)
		os.WriteFile(filepath.Join(e.dir, "stale.sealed"), s.Marshal(), 0o644)
		r := order(t, dir, operatorKey, kms.OrderSealTo, kms.SealToOrder{All: true, Recipient: to}.Args(), e.m.Hash)
		if r.Reason != kms.ReasonRecipient || !strings.Contains(r.Message, "stale") {
			t.Errorf("result %+v, want %s naming the secret", r, kms.ReasonRecipient)
		}
	})

	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"action":"order","decision":"allow","caller":"operator","destination":"seal_to"`,
		`"action":"order","decision":"deny","reason":"approval_bad_signature"`, `"action":"order","decision":"deny","reason":"unknown_secret"`,
		`"action":"seal_to","decision":"allow","reason":"operator order","caller":"operator","destination":"db-pass"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("kms's audit log lacks %s:\n%s", want, data)
		}
	}
	if bytes.Contains(data, []byte(secretValue)) || strings.Contains(e.logs.String(), secretValue) {
		t.Error("a secret is in kms's audit log or its log")
	}
}

// TestSealToOutlivesTheServerTimeouts: kms's server has 10-second read and write timeouts; a
// seal_to waiting for the operator lifts them for its own call, so an approval that comes later
// still gets its answer.
func TestSealToOutlivesTheServerTimeouts(t *testing.T) {
	var dir string
	e := newEnv(t, &pbp.KMSRules{Ops: ops("seal_to")}, withGate(t, gate.Every, time.Minute, &dir))
	hour := time.Now().Add(time.Hour).Truncate(time.Second)
	e.put(t, "api-key", "api-key", secretValue, hour, nil)
	ts := httptest.NewUnstartedServer(e.srv)
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Listener = tls.NewListener(ts.Listener, mtls.ServerConfig(e.ca.Session(t, e.m)["kms"], e.ca.Bundle(), e.m, "kms"))
	ts.Start()
	t.Cleanup(ts.Close)
	sk, _ := seal.GenerateKey()
	to, _ := seal.NewRecipient(sk.PublicKey(), time.Now())
	go func() {
		time.Sleep(700 * time.Millisecond) // past both timeouts
		<-decide(dir, gate.Approve)
	}()
	f, err := kms.NewClient(e.hc, "https://"+ts.Listener.Addr().String(), e.m.Hash).SealTo(context.Background(), "api-key", to, hour)
	if err != nil {
		t.Fatalf("seal_to approved after the server's timeouts: %v", err)
	}
	if got, err := seal.Open(sk, f); err != nil || string(got) != secretValue {
		t.Fatalf("opens to %q, %v", got, err)
	}
}
