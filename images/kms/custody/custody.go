// Package custody is the kms server: it holds the session identity (made here, its private
// scalar kept in a secret-memory page and scrubbed by destroy), decides every call with
// kms.Decide against the session's state (the nonce store, the count of openings, the sealed
// files read at each call), and answers the kms ops over HTTP, to be served behind
// mtls.ServerConfig. One audit line per call; no secret material in any line. A caller's seal_to
// waits for the operator's approval, and the operator's signed orders (`sharness-ai export`)
// re-seal secrets without any endpoint, both through the approval gate (gate.go, docs/gate.md).
//
// What it does not guarantee: that no copy of a secret or of the identity key stays in freed
// memory. Go's crypto makes its own copies on the garbage-collected heap (the ECDH scalar
// rebuilt for each operation, the HPKE plaintext) that cannot be scrubbed; only the key's
// long-lived copy is in the secret page, and only the opened values custody owns are scrubbed.
// The nonce store and the count of openings live as long as the process; a restarted kms has a
// new identity, and the timestamp window refuses old requests.
package custody

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sharness-ai/sharness/images/kms/hygiene"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// DefaultMaxNonces bounds the nonce store. At one call per request of an agent's model loop, a
// full store means a caller out of control; kms then refuses rather than forgets (a forgotten
// nonce could be replayed).
const DefaultMaxNonces = 4096

// Config is what New needs.
type Config struct {
	Manifest   *pbp.Manifest
	Self       string         // kms's component name
	SecretsDir string         // where <name>.sealed files are read, at each call
	Hygiene    hygiene.Report // what hygiene.Harden got; the key page's status is added
	Log        *slog.Logger
	Audit      *audit.Writer    // the record: one event per call; nil records nothing (tests)
	Now        func() time.Time // nil: time.Now
	MaxNonces  int              // 0: DefaultMaxNonces
	// OnDestroy runs once after the destroy answer is written; the binary stops there. It must
	// not block.
	OnDestroy func()
	// Gate asks the operator about each caller's seal_to (gate.Gate; a nil *gate.Gate refuses
	// with approval_unavailable). Unset, every seal_to is refused so.
	Gate Asker
}

// Server is the kms identity and its HTTP API. Serve it only behind mtls.ServerConfig: the
// caller is the component named by the peer's SVID.
type Server struct {
	cfg    Config
	rules  kms.Rules
	bundle *seal.Bundle

	once      sync.Once    // runs OnDestroy
	mu        sync.RWMutex // held for writing only by destroy
	scalar    []byte       // the identity's private scalar, in secret memory
	mem       []byte       // the mapping that holds it
	destroyed bool

	nmu    sync.Mutex
	nonces map[[16]byte]time.Time
	uses   int
}

// New makes the session identity and the rules of cfg.Self.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxNonces == 0 {
		cfg.MaxNonces = DefaultMaxNonces
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	mem, how, err := hygiene.SecretPage(32)
	if err != nil {
		return nil, err
	}
	hyg := maps.Clone(cfg.Hygiene)
	if hyg == nil {
		hyg = hygiene.Report{}
	}
	hyg["memfd_secret"] = how
	sk, err := seal.GenerateKey()
	if err != nil {
		hygiene.Free(mem)
		return nil, fmt.Errorf("make identity: %w", err)
	}
	raw, err := sk.Bytes()
	if err != nil {
		hygiene.Free(mem)
		return nil, fmt.Errorf("make identity: %w", err)
	}
	s := &Server{cfg: cfg, mem: mem, scalar: mem[:copy(mem, raw)], nonces: map[[16]byte]time.Time{}}
	clear(raw)
	s.cfg.Hygiene = hyg
	if s.bundle, err = seal.NewBundle(sk.PublicKey(), cfg.Manifest.Hash, cfg.Now(), hyg); err != nil {
		s.Destroy()
		return nil, err
	}
	if s.rules, err = kms.NewRules(cfg.Manifest, cfg.Self, s.bundle.Fingerprint()); err != nil {
		s.Destroy()
		return nil, err
	}
	return s, nil
}

// Public is the identity's bundle: public material only.
func (s *Server) Public() *seal.Bundle { return s.bundle }

// Rules are the rules the server decides with.
func (s *Server) Rules() kms.Rules { return s.rules }

// Hygiene is the memory-hygiene report, the one in the bundle.
func (s *Server) Hygiene() hygiene.Report { return s.cfg.Hygiene }

// Destroy scrubs and unmaps the identity key; every later call but destroy is refused. It is
// idempotent.
func (s *Server) Destroy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.destroyed {
		hygiene.Free(s.mem)
		s.mem, s.scalar, s.destroyed = nil, nil, true
	}
}

// ServeHTTP serves POST /v1/<op> and writes one audit line per call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, _ := strings.CutPrefix(r.URL.Path, "/v1/")
	c := kms.Call{Caller: callerOf(s.cfg.Manifest, r), Op: op}
	var answer []byte
	var ref *kms.Refusal
	if err := s.cfg.Audit.Err(); err != nil { // no opening that cannot be recorded (issue 22)
		s.cfg.Log.Error("kms: refusing: the audit log takes no more lines", "op", op, "error", err.Error())
		ref = kms.Refuse(kms.ReasonAudit, "kms cannot write its audit log, so it opens nothing: the person must free kms's audit volume and restart kms")
	} else {
		answer, ref = s.call(w, r, &c)
	}
	name := ""
	if c.Request != nil {
		name = c.Request.Name
	}
	attrs := []any{"op", op, "caller", c.Caller, "name", name, "result", "ok"}
	if ref != nil {
		attrs = append(attrs[:len(attrs)-1], "refused", "reason", ref.Type, "status", ref.Status)
	}
	s.cfg.Log.Info("kms call", attrs...)
	s.cfg.Audit.Record(s.cfg.Log, event(c, name, ref))
	if ref != nil {
		writeRefusal(w, ref)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
	if c.Op == "destroy" && s.cfg.OnDestroy != nil {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		s.once.Do(s.cfg.OnDestroy)
	}
}

// event is a call's audit line: the op, who asked for which secret (its name, never its
// value), the verdict and the refusal's reason code.
func event(c kms.Call, name string, ref *kms.Refusal) audit.Event {
	e := audit.Event{Action: c.Op, Decision: "allow", Caller: c.Caller, Destination: name}
	if ref != nil {
		e.Decision, e.Reason, e.Fields = "deny", ref.Type, map[string]string{"status": strconv.Itoa(ref.Status)}
	}
	if c.Op == "seal_to" && c.Request != nil && c.Request.Recipient != nil {
		if e.Fields == nil {
			e.Fields = map[string]string{}
		}
		e.Fields["to"] = c.Request.Recipient.Fingerprint() // the recipient, as the operator approved it
	}
	return e
}

// call reads and parses the body into c, decides, and acts.
func (s *Server) call(w http.ResponseWriter, r *http.Request, c *kms.Call) ([]byte, *kms.Refusal) {
	if r.Method != http.MethodPost {
		return nil, kms.Refuse(kms.ReasonMethod, "kms takes POST only")
	}
	if !slices.Contains(pbp.KMSOps, c.Op) {
		return nil, kms.Refuse(kms.ReasonNotFound, "no kms op at %s", r.URL.Path)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, seal.MaxFile))
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		c.Malformed = kms.Refuse(kms.ReasonTooLarge, "a kms request has at most %d bytes", seal.MaxFile)
	case err != nil:
		c.Malformed = kms.Refuse(kms.ReasonBadRequest, "read body: %v", err)
	default:
		if c.Request, err = kms.ParseRequest(c.Op, body); err != nil {
			c.Malformed = kms.Refuse(kms.ReasonBadRequest, "%s: %v", c.Op, err)
		}
	}
	if c.Op == "seal_to" && c.Malformed == nil {
		return s.sealTo(r.Context(), w, *c) // waits for the operator, without the lock
	}
	s.mu.RLock()
	answer, ref := s.serve(*c, body)
	s.mu.RUnlock()
	if ref == nil && c.Op == "destroy" {
		s.Destroy() // after the read lock: Destroy takes the write lock, and is idempotent
	}
	return answer, ref
}

// serve decides and acts, under the read lock: every op but a well-formed seal_to (sealTo).
func (s *Server) serve(c kms.Call, body []byte) ([]byte, *kms.Refusal) {
	now := s.cfg.Now()
	f, ref := kms.Decide(s.rules, c, now, (*session)(s))
	if ref != nil {
		return nil, ref
	}
	switch c.Op {
	case "public":
		return s.bundle.Marshal(), nil
	case "destroy":
		out, _ := json.Marshal(kms.DestroyAnswer{V: 1, Destroyed: true})
		return out, nil
	}
	secret, release, ref := s.open(f)
	if ref != nil {
		return nil, ref
	}
	defer release()
	sealed, err := seal.SealResponse(c.Request.EphPub, body, secret)
	if err != nil {
		return nil, kms.Refuse(kms.ReasonInternal, "seal the answer")
	}
	out, _ := json.Marshal(kms.UnwrapAnswer{V: 1, Sealed: seal.EncodeBase64(sealed), ExpiresIn: int64(f.Expires().Sub(now) / time.Second)})
	return out, nil
}

// open opens f with the identity, into secret memory; the caller releases it. Under the read lock.
func (s *Server) open(f *seal.Sealed) ([]byte, func(), *kms.Refusal) {
	sk, err := seal.NewPrivateKey(s.scalar)
	if err != nil {
		return nil, nil, kms.Refuse(kms.ReasonInternal, "identity key")
	}
	opened, err := seal.Open(sk, f)
	if err != nil {
		return nil, nil, kms.Refuse(kms.ReasonInvalid, "secret %s does not open with this identity", f.Name())
	}
	secret, release, err := intoSecretPage(opened)
	if err != nil {
		return nil, nil, kms.Refuse(kms.ReasonInternal, "secret memory for %s", f.Name())
	}
	return secret, release, nil
}

// session is the Server as the Session Decide consults.
type session Server

func (s *session) Destroyed() bool { return s.destroyed }

func (s *session) UseNonce(nonce [16]byte, until time.Time) string {
	s.nmu.Lock()
	defer s.nmu.Unlock()
	now := s.cfg.Now()
	if exp, ok := s.nonces[nonce]; ok && now.Before(exp) {
		return kms.ReasonNonce
	}
	if len(s.nonces) >= s.cfg.MaxNonces {
		for n, exp := range s.nonces {
			if !now.Before(exp) {
				delete(s.nonces, n)
			}
		}
		if len(s.nonces) >= s.cfg.MaxNonces {
			return kms.ReasonNonceFull
		}
	}
	s.nonces[nonce] = until
	return ""
}

func (s *session) TakeUse(max int) bool {
	s.nmu.Lock()
	defer s.nmu.Unlock()
	if s.uses >= max {
		return false
	}
	s.uses++
	return true
}

// Load reads <dir>/<name>.sealed now, so a file placed or replaced by the host is seen.
func (s *session) Load(name string) (*seal.Sealed, *kms.Refusal) {
	data, err := readCapped(filepath.Join(s.cfg.SecretsDir, name+".sealed"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, kms.Refuse(kms.ReasonUnknown, "no sealed secret %s", name)
	}
	if err != nil {
		s.cfg.Log.Error("read sealed secret", "name", name, "error", err.Error())
		return nil, kms.Refuse(kms.ReasonInvalid, "secret %s cannot be read", name)
	}
	f, err := seal.ParseSealed(data)
	if err == nil && f.Name() != name {
		err = fmt.Errorf("file names secret %q", f.Name())
	}
	if err != nil {
		s.cfg.Log.Error("invalid sealed secret", "name", name, "error", err.Error())
		return nil, kms.Refuse(kms.ReasonInvalid, "secret %s is not a valid sealed secret file", name)
	}
	return f, nil
}

func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, seal.MaxFile+1))
	if err == nil && len(data) > seal.MaxFile {
		err = fmt.Errorf("more than %d bytes", seal.MaxFile)
	}
	return data, err
}

// callerOf names the component whose verified SVID the connection carries, or "".
func callerOf(m *pbp.Manifest, r *http.Request) string {
	if r.TLS == nil {
		return ""
	}
	c, err := mtls.PeerComponent(m, *r.TLS)
	if err != nil {
		return ""
	}
	return c.Name
}

func writeRefusal(w http.ResponseWriter, ref *kms.Refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ref.Status)
	w.Write(ref.JSON())
}

// intoSecretPage moves an opened secret out of the Go heap at once: into a memfd_secret page
// where the kernel allows it (hygiene.SecretPage says what it got otherwise), scrubbing the heap
// copy. What crypto/hpke copied while opening it is beyond reach (package comment).
func intoSecretPage(opened []byte) ([]byte, func(), error) {
	defer clear(opened)
	mem, _, err := hygiene.SecretPage(len(opened))
	if err != nil {
		return nil, nil, err
	}
	n := copy(mem, opened)
	return mem[:n:n], func() { hygiene.Free(mem) }, nil
}
