package custody

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/kms/hygiene"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

const secretValue = "sk-ant-api03-very-secret"

// env is a kms served over real mTLS to llm, as in the stack.
type env struct {
	m         *pbp.Manifest
	srv       *Server
	url       string
	hc        *http.Client // llm's
	client    *kms.Client
	dir       string
	logs      *syncBuffer
	skew      atomic.Int64 // added to kms's clock
	destroyed atomic.Int32
	ca        *mtlstest.CA
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newEnv serves a kms for the full fixture, with its kms rules replaced when rules is non-nil.
func newEnv(t testing.TB, rules *pbp.KMSRules, edit func(*Config)) *env {
	t.Helper()
	e := &env{m: loadFull(t), dir: t.TempDir(), logs: &syncBuffer{}}
	if rules != nil {
		e.m.Component("kms").Business.KMS = rules
	}
	cfg := Config{Manifest: e.m, Self: "kms", SecretsDir: e.dir, Hygiene: hygiene.Report{"mlockall": "degraded: test"},
		Log: slog.New(slog.NewJSONHandler(e.logs, nil)), Now: func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) },
		OnDestroy: func() { e.destroyed.Add(1) }}
	if edit != nil {
		edit(&cfg)
	}
	var err error
	if e.srv, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.srv.Destroy)
	e.ca = mtlstest.NewCA(t, e.m.TrustDomain)
	svids := e.ca.Session(t, e.m)
	ts := httptest.NewUnstartedServer(e.srv)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	ts.Listener = tls.NewListener(ts.Listener, mtls.ServerConfig(svids["kms"], e.ca.Bundle(), e.m, "kms"))
	ts.Start()
	t.Cleanup(ts.Close)
	e.url = "https://" + ts.Listener.Addr().String()
	cc, err := mtls.ClientConfig(svids["llm"], e.ca.Bundle(), e.m, "llm", "kms")
	if err != nil {
		t.Fatal(err)
	}
	e.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: cc}, Timeout: 10 * time.Second}
	t.Cleanup(e.hc.CloseIdleConnections)
	e.client = kms.NewClient(e.hc, e.url, e.m.Hash)
	return e
}

// put seals value to to (kms itself when nil) and writes it as file <name>.sealed.
func (e *env) put(t testing.TB, file, name, value string, expires time.Time, signer ed25519.PrivateKey) {
	t.Helper()
	to := e.srv.Public().Key()
	s, err := seal.Seal(to, name, []byte(value), expires, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, file+".sealed"), s.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func loadFull(t testing.TB) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS("../../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatalf("load fixture: %v", err)
	}
	return m
}

func ops(o ...string) *[]string { return &o }
func intp(n int) *int           { return &n }

func TestUnwrapRoundTrip(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put(t, "api-key", "api-key", secretValue, time.Now().Add(time.Hour), nil)
	for range 3 {
		got, err := e.client.Unwrap(context.Background(), "api-key")
		if err != nil || string(got) != secretValue {
			t.Fatalf("Unwrap = %q, %v", got, err)
		}
	}
	b, err := e.client.Public(context.Background())
	if err != nil || b.Fingerprint() != e.srv.Public().Fingerprint() {
		t.Fatalf("Public = %v, %v", b, err)
	}
	if b.Hygiene()["mlockall"] != "degraded: test" || b.Hygiene()["memfd_secret"] == "" {
		t.Errorf("bundle hygiene %v: want the configured report and the key memory's", b.Hygiene())
	}
	logs := e.logs.String()
	if strings.Contains(logs, secretValue) || strings.Count(logs, `"msg":"kms call"`) != 4 {
		t.Fatalf("audit log:\n%s", logs)
	}
	var line map[string]any
	json.Unmarshal([]byte(strings.SplitN(logs, "\n", 2)[0]), &line)
	for k, want := range map[string]any{"op": "unwrap", "caller": "llm", "name": "api-key", "result": "ok"} {
		if line[k] != want {
			t.Errorf("audit line %v: %s = %v, want %v", line, k, line[k], want)
		}
	}
}

// TestRefusals drives each refusal through the client over mTLS.
func TestRefusals(t *testing.T) {
	_, trusted, _ := ed25519.GenerateKey(rand.Reader)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	trustedPins := []string{keys.Pin(trusted.Public().(ed25519.PublicKey))}
	hour := time.Now().Add(time.Hour)
	cases := []struct {
		name   string
		rules  *pbp.KMSRules
		edit   func(*Config)
		setup  func(t *testing.T, e *env)
		call   func(e *env) error
		reason string
	}{
		{name: "unknown secret", reason: kms.ReasonUnknown},
		{name: "invalid file", reason: kms.ReasonInvalid, setup: func(t *testing.T, e *env) {
			os.WriteFile(filepath.Join(e.dir, "api-key.sealed"), []byte(`{"v":1}`), 0o644)
		}},
		{name: "file of another name", reason: kms.ReasonInvalid, setup: func(t *testing.T, e *env) { e.put(t, "api-key", "other", "x", hour, nil) }},
		{name: "wrong recipient", reason: kms.ReasonRecipient, setup: func(t *testing.T, e *env) {
			sk, _ := seal.GenerateKey()
			s, _ := seal.Seal(sk.PublicKey(), "api-key", []byte("x"), hour, nil)
			os.WriteFile(filepath.Join(e.dir, "api-key.sealed"), s.Marshal(), 0o644)
		}},
		{name: "expired", reason: kms.ReasonExpired, setup: func(t *testing.T, e *env) {
			e.put(t, "api-key", "api-key", "x", time.Now().Add(2*time.Second), nil)
			e.skew.Store(int64(3 * time.Second)) // within the timestamp window, past the expiry
		}},
		{name: "policy mismatch", reason: kms.ReasonPolicy, call: func(e *env) error {
			_, err := kms.NewClient(e.hc, e.url, "sha256:"+strings.Repeat("0", 64)).Unwrap(context.Background(), "api-key")
			return err
		}},
		{name: "clock skew", reason: kms.ReasonTimestamp, setup: func(t *testing.T, e *env) { e.skew.Store(int64(2 * time.Minute)) }},
		{name: "op not allowed", reason: kms.ReasonOp, call: func(e *env) error {
			_, err := e.client.SealTo(context.Background(), "api-key", e.srv.Public(), hour)
			return err
		}},
		{name: "ops unset", reason: kms.ReasonOp, rules: &pbp.KMSRules{}},
		{name: "untrusted sender", reason: kms.ReasonSender, rules: &pbp.KMSRules{Ops: ops("unwrap"), TrustedSenders: &trustedPins},
			setup: func(t *testing.T, e *env) { e.put(t, "api-key", "api-key", "x", hour, stranger) }},
		{name: "unsigned with trusted senders", reason: kms.ReasonSender, rules: &pbp.KMSRules{Ops: ops("unwrap"), TrustedSenders: &trustedPins},
			setup: func(t *testing.T, e *env) { e.put(t, "api-key", "api-key", "x", hour, nil) }},
		{name: "max_unwraps 0", reason: kms.ReasonLimit, rules: &pbp.KMSRules{Ops: ops("unwrap"), MaxUnwraps: intp(0)}},
		{name: "max_unwraps 2", reason: kms.ReasonLimit, rules: &pbp.KMSRules{Ops: ops("unwrap", "seal_to"), MaxUnwraps: intp(2)}, edit: autoGate(t), call: func(e *env) error {
			for range 2 {
				if _, err := e.client.Unwrap(context.Background(), "api-key"); err != nil {
					return err
				}
			}
			_, err := e.client.SealTo(context.Background(), "api-key", e.srv.Public(), hour) // seal_to counts too
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.rules, tc.edit)
			if tc.setup != nil {
				tc.setup(t, e)
			} else if tc.reason != kms.ReasonUnknown {
				e.put(t, "api-key", "api-key", secretValue, hour, trusted)
			}
			call := tc.call
			if call == nil {
				call = func(e *env) error { _, err := e.client.Unwrap(context.Background(), "api-key"); return err }
			}
			err := call(e)
			var ref *kms.Refusal
			if !errors.Is(err, kms.ErrRefused) || !errors.As(err, &ref) || ref.Type != tc.reason || ref.Status != kms.Refuse(tc.reason, "").Status {
				t.Fatalf("error %v, want a %s refusal", err, tc.reason)
			}
			if errors.Is(err, kms.ErrUnreachable) {
				t.Error("a refusal is also kms.ErrUnreachable")
			}
			if !strings.Contains(e.logs.String(), `"reason":"`+tc.reason+`"`) || strings.Contains(e.logs.String(), secretValue) {
				t.Errorf("audit log:\n%s", e.logs.String())
			}
		})
	}
}

// post sends a raw body as llm and returns the status and error type.
func (e *env) post(t *testing.T, method, path string, body []byte) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var a kms.ErrorAnswer
	json.Unmarshal(out, &a)
	return resp.StatusCode, a.Error.Type, out
}

func unwrapJSON(t testing.TB, m *pbp.Manifest, edit func(map[string]any)) []byte {
	sk, _ := seal.GenerateKey()
	nonce := make([]byte, 16)
	rand.Read(nonce)
	b := map[string]any{"v": 1, "name": "api-key", "eph_pub": seal.EncodeBase64(sk.PublicKey().Bytes()),
		"nonce": seal.EncodeBase64(nonce), "ts": time.Now().UTC().Format(time.RFC3339), "policy_hash": m.Hash}
	if edit != nil {
		edit(b)
	}
	out, _ := json.Marshal(b)
	return out
}

func TestRawRequests(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.put(t, "api-key", "api-key", secretValue, time.Now().Add(time.Hour), nil)
	body := unwrapJSON(t, e.m, nil)
	if st, typ, out := e.post(t, "POST", "/v1/unwrap", body); st != 200 {
		t.Fatalf("first unwrap: %d %s %s", st, typ, out)
	}
	big := append(unwrapJSON(t, e.m, func(b map[string]any) { b["name"] = strings.Repeat("a", seal.MaxFile) }), ' ')
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		status             int
		reason             string
	}{
		{"replay", "POST", "/v1/unwrap", body, 409, kms.ReasonNonce},
		{"GET", "GET", "/v1/public", nil, 405, kms.ReasonMethod},
		{"unknown op", "POST", "/v1/export", []byte(`{"v":1}`), 404, kms.ReasonNotFound},
		{"no op", "POST", "/", []byte(`{"v":1}`), 404, kms.ReasonNotFound},
		{"too large", "POST", "/v1/unwrap", big, 413, kms.ReasonTooLarge},
		{"not json", "POST", "/v1/unwrap", []byte(`{`), 400, kms.ReasonBadRequest},
		{"case-variant key", "POST", "/v1/unwrap", bytes.Replace(unwrapJSON(t, e.m, nil), []byte(`"name"`), []byte(`"NAME"`), 1), 400, kms.ReasonBadRequest},
		{"duplicate key", "POST", "/v1/unwrap", bytes.Replace(unwrapJSON(t, e.m, nil), []byte(`"v":1`), []byte(`"v":1,"v":1`), 1), 400, kms.ReasonBadRequest},
		{"unknown key", "POST", "/v1/unwrap", unwrapJSON(t, e.m, func(b map[string]any) { b["extra"] = 1 }), 400, kms.ReasonBadRequest},
		{"path name", "POST", "/v1/unwrap", unwrapJSON(t, e.m, func(b map[string]any) { b["name"] = "../../etc/passwd" }), 400, kms.ReasonBadRequest},
		{"short nonce", "POST", "/v1/unwrap", unwrapJSON(t, e.m, func(b map[string]any) { b["nonce"] = "AAAA" }), 400, kms.ReasonBadRequest},
		{"bad eph_pub", "POST", "/v1/unwrap", unwrapJSON(t, e.m, func(b map[string]any) { b["eph_pub"] = seal.EncodeBase64(make([]byte, 65)) }), 400, kms.ReasonBadRequest},
		{"version", "POST", "/v1/unwrap", unwrapJSON(t, e.m, func(b map[string]any) { b["v"] = 2 }), 400, kms.ReasonBadRequest},
		{"old ts", "POST", "/v1/unwrap", unwrapJSON(t, e.m, func(b map[string]any) { b["ts"] = time.Now().Add(-2 * time.Minute).UTC().Format(time.RFC3339) }), 400, kms.ReasonTimestamp},
		{"public with extra", "POST", "/v1/public", []byte(`{"v":1,"name":"x"}`), 400, kms.ReasonBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, typ, out := e.post(t, tc.method, tc.path, tc.body)
			if st != tc.status || typ != tc.reason {
				t.Errorf("%d %s (%s), want %d %s", st, typ, out, tc.status, tc.reason)
			}
		})
	}
	// Every call above is one audit line.
	if n := strings.Count(e.logs.String(), `"msg":"kms call"`); n != 16 {
		t.Errorf("%d audit lines for 16 calls", n)
	}
}

func TestNonceStoreFull(t *testing.T) {
	e := newEnv(t, nil, func(c *Config) { c.MaxNonces = 2 })
	e.put(t, "api-key", "api-key", secretValue, time.Now().Add(time.Hour), nil)
	for i := range 2 {
		if _, err := e.client.Unwrap(context.Background(), "api-key"); err != nil {
			t.Fatalf("unwrap %d: %v", i, err)
		}
	}
	var ref *kms.Refusal
	if _, err := e.client.Unwrap(context.Background(), "api-key"); !errors.As(err, &ref) || ref.Type != kms.ReasonNonceFull {
		t.Fatalf("third unwrap: %v, want %s", err, kms.ReasonNonceFull)
	}
	// Three minutes on, the first nonces have expired (ts + 2 min) and make room.
	e.skew.Store(int64(3 * time.Minute))
	later := unwrapJSON(t, e.m, func(b map[string]any) { b["ts"] = time.Now().Add(3 * time.Minute).UTC().Format(time.RFC3339) })
	if st, typ, out := e.post(t, "POST", "/v1/unwrap", later); st != 200 {
		t.Fatalf("after the nonces expired: %d %s %s", st, typ, out)
	}
}

func TestSealTo(t *testing.T) {
	e := newEnv(t, &pbp.KMSRules{Ops: ops("seal_to")}, autoGate(t)) // gate_test.go asks a person
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	e.put(t, "api-key", "api-key", secretValue, expires, nil)
	sk, _ := seal.GenerateKey()
	to, err := seal.NewBundle(sk.PublicKey(), "sha256:"+strings.Repeat("c", 64), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.client.SealTo(context.Background(), "api-key", to, expires.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := seal.Open(sk, f); err != nil || string(got) != secretValue || f.To() != to.Fingerprint() {
		t.Fatalf("re-sealed file opens to %q, %v", got, err)
	}
	var ref *kms.Refusal
	if _, err := e.client.SealTo(context.Background(), "api-key", to, expires.Add(time.Minute)); !errors.As(err, &ref) || ref.Type != kms.ReasonExpiry {
		t.Fatalf("seal_to past the secret's expiry: %v, want %s", err, kms.ReasonExpiry)
	}
}

func TestDestroy(t *testing.T) {
	e := newEnv(t, &pbp.KMSRules{Ops: ops("public", "unwrap", "destroy")}, nil)
	e.put(t, "api-key", "api-key", secretValue, time.Now().Add(time.Hour), nil)
	ctx := context.Background()
	if err := e.client.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Destroy(ctx); err != nil {
		t.Fatalf("second destroy: %v, want idempotent", err)
	}
	if n := e.destroyed.Load(); n != 1 {
		t.Errorf("OnDestroy ran %d times, want 1", n)
	}
	var ref *kms.Refusal
	if _, err := e.client.Unwrap(ctx, "api-key"); !errors.As(err, &ref) || ref.Type != kms.ReasonDestroyed || ref.Status != 410 {
		t.Fatalf("unwrap after destroy: %v", err)
	}
	if _, err := e.client.Public(ctx); !errors.As(err, &ref) || ref.Type != kms.ReasonDestroyed {
		t.Fatalf("public after destroy: %v", err)
	}
	if e.srv.scalar != nil || e.srv.mem != nil {
		t.Error("the identity key is still mapped")
	}
}

func TestUnreachable(t *testing.T) {
	e := newEnv(t, nil, nil)
	c := kms.NewClient(e.hc, "https://127.0.0.1:1", e.m.Hash)
	if _, err := c.Unwrap(context.Background(), "api-key"); !errors.Is(err, kms.ErrUnreachable) || errors.Is(err, kms.ErrRefused) {
		t.Fatalf("closed port: %v, want kms.ErrUnreachable", err)
	}
	// A component without an edge to kms fails the handshake: unreachable, not refused.
	bash := mtlstest.NewCA(t, e.m.TrustDomain) // and from a foreign CA, for good measure
	cc, _ := mtls.ClientConfig(bash.SVID(t, "llm"), e.ca.Bundle(), e.m, "llm", "kms")
	c = kms.NewClient(&http.Client{Transport: &http.Transport{TLSClientConfig: cc}}, e.url, e.m.Hash)
	if _, err := c.Unwrap(context.Background(), "api-key"); !errors.Is(err, kms.ErrUnreachable) {
		t.Fatalf("foreign SVID: %v, want kms.ErrUnreachable", err)
	}
	// An answer that is no kms answer.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(502) }))
	defer plain.Close()
	if _, err := kms.NewClient(plain.Client(), plain.URL, e.m.Hash).Unwrap(context.Background(), "api-key"); !errors.Is(err, kms.ErrBadAnswer) {
		t.Fatalf("502 without a kms error: %v, want kms.ErrBadAnswer", err)
	}
}

// TestLargeSecretUnwraps: an opened secret moves into secret memory of as many pages as it needs
// (sharness-ai secret seal takes up to 8 KiB).
func TestLargeSecretUnwraps(t *testing.T) {
	e := newEnv(t, nil, nil)
	big := strings.Repeat("0123456789abcdef", 512) // 8 KiB, two pages
	e.put(t, "big", "big", big, time.Now().Add(time.Hour), nil)
	got, err := e.client.Unwrap(context.Background(), "big")
	if err != nil || string(got) != big {
		t.Fatalf("Unwrap of 8 KiB: %d bytes, %v", len(got), err)
	}
}

// TestAuditEvent: a call's audit line names the op, the caller and the secret, never its value;
// a refusal adds its reason code and status.
func TestAuditEvent(t *testing.T) {
	c := kms.Call{Caller: "llm", Op: "unwrap"}
	if got, want := event(c, "api-key", nil), (audit.Event{Action: "unwrap", Decision: "allow", Caller: "llm", Destination: "api-key"}); !reflect.DeepEqual(got, want) {
		t.Errorf("allowed: %+v, want %+v", got, want)
	}
	ref := kms.Refuse(kms.ReasonNotFound, "no kms op at %s", "/v1/x")
	want := audit.Event{Action: "unwrap", Decision: "deny", Reason: kms.ReasonNotFound, Caller: "llm", Destination: "api-key", Fields: map[string]string{"status": strconv.Itoa(ref.Status)}}
	if got := event(c, "api-key", ref); !reflect.DeepEqual(got, want) {
		t.Errorf("refused: %+v, want %+v", got, want)
	}
}
