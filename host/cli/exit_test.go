package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/host/bundle"
	"github.com/sharness-ai/sharness/host/exit"
	"github.com/sharness-ai/sharness/images/kms/custody"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/bundletest"
	"github.com/sharness-ai/sharness/testkit/enginetest"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

const exitSecret = "sk-ant-api03-exit-test-0123456789abcdef"

// exitStack is compose project "demo" as export finds it on the host: the volumes of the
// launcher's, net's and kms's audit logs and kms's gate volume, under root, with docker faked to
// list and inspect them; and kms itself, the real custody server and its order loop, in-process,
// holding one sealed secret.
type exitStack struct {
	root, secrets, operatorKey string
	m                          *pbp.Manifest
	kms                        *custody.Server
	stop                       func() // stops kms's order loop
}

func newExitStack(t *testing.T, operatorPub ed25519.PublicKey) *exitStack {
	t.Helper()
	copyTree(t, "policies")
	m, err := pbp.Load(os.DirFS("policies/default"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := &exitStack{root: t.TempDir(), secrets: t.TempDir(), m: m}
	ca := mtlstest.NewCA(t, m.TrustDomain)
	vol := func(name string) string {
		dir := filepath.Join(s.root, name, "_data")
		os.MkdirAll(dir, 0o755)
		return dir
	}
	writers := map[string]*audit.Writer{}
	for _, comp := range []string{"launcher", "net", "kms"} {
		w, err := audit.Open(filepath.Join(vol("demo_audit-"+comp), audit.FileName), audit.Config{Component: comp, Policy: m.Hash, SessionCA: audit.CAHash(ca.Cert()), SVID: ca.SVID(t, comp)})
		if err != nil {
			t.Fatal(err)
		}
		writers[comp] = w
	}
	writers["launcher"].Log(audit.Event{Action: "session_start", Decision: "allow", Fields: map[string]string{"session_ca_sha256": audit.CAHash(ca.Cert()),
		"policy": m.Hash, "ca_cert": base64.StdEncoding.EncodeToString(ca.Cert().Raw)}})
	writers["net"].Log(audit.Event{Action: "egress", Decision: "deny", Caller: "agent", Destination: "evil.example:443"})
	writers["launcher"].Close()
	writers["net"].Close()
	t.Cleanup(func() { writers["kms"].Close() }) // kms runs: its log has an unsigned tail

	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if s.kms, err = custody.New(custody.Config{Manifest: m, Self: "kms", SecretsDir: s.secrets, Log: log, Audit: writers["kms"]}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kms.Destroy)
	g, err := gate.Open(gate.Config{Dir: vol("demo_gate-kms"), Component: "kms", Policy: m.Hash, Operator: operatorPub, Poll: 5 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeOrders(ctx, s.kms.Order, s.kms.RecordOrder) }()
	s.stop = func() { cancel(); <-done }
	t.Cleanup(func() { cancel() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(s.root, "demo_gate-kms", "_data", "orders")); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("kms made no orders folder")
		}
	}
	sealed, err := seal.Seal(s.kms.Public().Key(), "anthropic-api-key", []byte(exitSecret), time.Now().Add(24*time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.secrets, "anthropic-api-key.sealed"), sealed.Marshal(), 0o644)

	origPoll := exitPoll
	t.Cleanup(func() { exitPoll = origPoll })
	exitPoll = 5 * time.Millisecond
	e := &enginetest.Engine{}
	for _, name := range []string{"demo_audit-kms", "demo_audit-launcher", "demo_audit-net", "demo_gate-kms"} {
		e.Volumes = append(e.Volumes, enginetest.Volume{Name: name, Mountpoint: filepath.Join(s.root, name, "_data")})
	}
	useAPI(t, e)
	s.operatorKey = filepath.Join(t.TempDir(), "operator.key")
	return s
}

// exitKeys are an operator key and a recipient key pair on disk.
func exitKeys(t *testing.T) (operatorKey string, operatorPub ed25519.PublicKey, recipientKey, recipientBundle string) {
	t.Helper()
	dir := t.TempDir()
	operatorKey = filepath.Join(dir, "operator.key")
	pub, err := gate.GenerateOperatorKey(operatorKey)
	if err != nil {
		t.Fatal(err)
	}
	recipientKey = filepath.Join(dir, "me.key")
	if code, out, errOut := run(t, "recipient", "init", "--key", recipientKey); code != ExitOK {
		t.Fatalf("recipient init: exit %d\n%s%s", code, out, errOut)
	}
	return operatorKey, pub, recipientKey, filepath.Join(dir, "me.bundle")
}

// secretForms are the spellings in which a leaked secret would show in a file.
func secretForms(v string) []string {
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))}
}

func TestRecipientInit(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "keys", "me.key")
	code, out, errOut := run(t, "recipient", "init", "--key", key, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	st, err := os.Stat(key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key: %v, mode %v, want 0600", err, st.Mode())
	}
	data, _ := os.ReadFile(filepath.Join(dir, "keys", "me.bundle"))
	b, err := seal.ParseBundle(bytes.TrimSpace(data))
	if err != nil || !b.IsRecipient() || !strings.Contains(out, b.Fingerprint()) {
		t.Fatalf("bundle %s: %v (output %s)", data, err, out)
	}
	k, err := readRecipientKey(key)
	if err != nil || seal.Fingerprint(k.PublicKey()) != b.Fingerprint() {
		t.Fatalf("the key is not the bundle's: %v", err)
	}
	before, _ := os.ReadFile(key)
	if code, _, errOut := run(t, "recipient", "init", "--key", key); code != ExitRefused || !strings.Contains(errOut, "refusing to overwrite") {
		t.Errorf("a second init: exit %d, %s", code, errOut)
	}
	if after, _ := os.ReadFile(key); !bytes.Equal(before, after) {
		t.Error("a second init changed the key")
	}
	os.Chmod(key, 0o644)
	if _, err := readRecipientKey(key); err == nil {
		t.Error("a recipient key others can read was accepted")
	}
}

// TestExportImportRoundTrip: a secret sealed to the stack's kms is exported through a real order
// carried out by the real kms code, with the policy and the audit logs; nothing in the bundle is
// the secret in any spelling; import checks it, restores the policy (same hash) and the logs,
// and re-seals the secret to a second kms identity, which opens it to the original bytes.
func TestExportImportRoundTrip(t *testing.T) {
	opKey, opPub, rKey, rBundle := exitKeys(t)
	s := newExitStack(t, opPub)
	out := filepath.Join(t.TempDir(), "export.tar")
	code, stdout, errOut := run(t, "export", "--project", "demo", "--to", rBundle, "--out", out, "--key", opKey, "--json")
	if code != ExitOK {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, errOut)
	}
	var res struct {
		Secrets []string
		Audit   exit.Audit
		Policy  string
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Policy != s.m.Hash || len(res.Secrets) != 1 || !res.Audit.OK || len(res.Audit.Logs) != 3 {
		t.Fatalf("export --json: %v\n%s", err, stdout)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %v, want 0600", st.Mode())
	}
	for _, f := range secretForms(exitSecret) {
		if bytes.Contains(data, []byte(f)) {
			t.Fatalf("the bundle holds the secret (%.12s…) in the clear", f)
		}
	}
	if _, err := bundle.Read(data); err != nil {
		t.Fatal(err)
	}
	// kms records the order before it answers, so the exported log holds it.
	if kmsLog := bundletest.Part(t, data, "audit/kms.jsonl"); !bytes.Contains(kmsLog, []byte(`"action":"order","decision":"allow","caller":"operator"`)) {
		t.Errorf("the exported kms log does not record the order:\n%s", kmsLog)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.root, "demo_gate-kms", "_data", "orders")); len(entries) != 0 {
		t.Errorf("orders left in kms's gate folder: %v", entries)
	}
	if code, _, errOut := run(t, "export", "--project", "demo", "--to", rBundle, "--out", out, "--key", opKey); code != ExitRefused || !strings.Contains(errOut, "refusing to overwrite") {
		t.Errorf("export over an existing file: exit %d, %s", code, errOut)
	}

	// The new stack's kms: a second identity under the same policy, as `kms bundle` finds it.
	sk2, _ := seal.GenerateKey()
	kms2, _ := seal.NewBundle(sk2.PublicKey(), s.m.Hash, time.Now(), map[string]string{"mlockall": "ok"})
	origLogs := composeLogs
	t.Cleanup(func() { composeLogs = origLogs })
	composeLogs = func(_ context.Context, project string, _ []string) ([]byte, error) {
		if project != "demo2" {
			return nil, fmt.Errorf("logs of project %q", project)
		}
		return []byte("starting\n" + seal.BundleLogPrefix + string(kms2.Marshal()) + "\n"), nil
	}
	into, secrets2 := filepath.Join(t.TempDir(), "restored"), t.TempDir()
	code, stdout, errOut = run(t, "import", out, "--key", rKey, "--into", into, "--project", "demo2", "--secrets-dir", secrets2,
		"--operator-pubkey", gate.FormatPublicKey(opPub))
	if code != ExitOK {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, errOut)
	}
	sealedData, err := os.ReadFile(filepath.Join(secrets2, "anthropic-api-key.sealed"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := seal.ParseSealed(sealedData)
	if err != nil || f.To() != kms2.Fingerprint() {
		t.Fatalf("the re-sealed file: %v, to %s", err, f.To())
	}
	if pt, err := seal.Open(sk2, f); err != nil || string(pt) != exitSecret {
		t.Fatalf("the new kms opens %q, %v, want the original secret", pt, err)
	}
	m2, err := pbp.Load(os.DirFS(into), "manifest.yaml")
	if err != nil || m2.Hash != s.m.Hash {
		t.Fatalf("the restored policy: %v, hash %v, want %s", err, m2, s.m.Hash)
	}
	var v exit.Audit
	if raw, err := os.ReadFile(filepath.Join(into, "audit-archive", "verify.json")); err != nil || json.Unmarshal(raw, &v) != nil || !v.OK || len(v.Logs) != 3 {
		t.Errorf("audit-archive/verify.json: %v %+v", err, v)
	}
	for _, f := range []string{"audit-archive/kms.jsonl", "audit-archive/launcher.jsonl", "sealed/anthropic-api-key.sealed", "export.json", "layers/L3-kms.yaml"} {
		if _, err := os.Stat(filepath.Join(into, f)); err != nil {
			t.Errorf("restored %s: %v", f, err)
		}
	}
	filepath.WalkDir(into, func(p string, d os.DirEntry, err error) error {
		if b, _ := os.ReadFile(p); err == nil && !d.IsDir() && bytes.Contains(b, []byte(exitSecret)) {
			t.Errorf("%s holds the secret in the clear", p)
		}
		return nil
	})

	t.Run("again into the same folder", func(t *testing.T) {
		if code, _, errOut := run(t, "import", out, "--key", rKey, "--into", into); code != ExitRefused || !strings.Contains(errOut, "refusing to overwrite") {
			t.Errorf("exit %d, %s", code, errOut)
		}
	})
	t.Run("without a project", func(t *testing.T) {
		code, stdout, errOut := run(t, "import", out, "--key", rKey, "--into", filepath.Join(t.TempDir(), "r"))
		if code != ExitOK || !strings.Contains(stdout, "remain sealed to the recipient key") {
			t.Errorf("exit %d\n%s%s", code, stdout, errOut)
		}
	})
	t.Run("another operator key pinned", func(t *testing.T) {
		other, _, _ := ed25519.GenerateKey(nil)
		code, _, errOut := run(t, "import", out, "--key", rKey, "--into", filepath.Join(t.TempDir(), "r"), "--operator-pubkey", gate.FormatPublicKey(other))
		if code != ExitRefused || !strings.Contains(errOut, "not the one given") {
			t.Errorf("exit %d, %s", code, errOut)
		}
	})
	t.Run("another recipient key", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other.key")
		run(t, "recipient", "init", "--key", other)
		code, _, errOut := run(t, "import", out, "--key", other, "--into", filepath.Join(t.TempDir(), "r"))
		if code != ExitRefused || !strings.Contains(errOut, "the recipient key is") {
			t.Errorf("exit %d, %s", code, errOut)
		}
	})
	t.Run("a new kms under another policy", func(t *testing.T) {
		kms3, _ := seal.NewBundle(sk2.PublicKey(), "sha256:"+strings.Repeat("1", 64), time.Now(), nil)
		composeLogs = func(context.Context, string, []string) ([]byte, error) {
			return []byte(seal.BundleLogPrefix + string(kms3.Marshal()) + "\n"), nil
		}
		code, _, errOut := run(t, "import", out, "--key", rKey, "--into", filepath.Join(t.TempDir(), "r"), "--project", "demo3", "--secrets-dir", t.TempDir())
		if code != ExitRefused || !strings.Contains(errOut, "refusing to seal to it") {
			t.Errorf("exit %d, %s", code, errOut)
		}
	})
}

// exportedBundle runs a whole export and returns the bundle's bytes and the keys.
func exportedBundle(t *testing.T) (data []byte, rKey string, opKey ed25519.PrivateKey) {
	t.Helper()
	opFile, opPub, rKey, rBundle := exitKeys(t)
	newExitStack(t, opPub)
	out := filepath.Join(t.TempDir(), "export.tar")
	if code, stdout, errOut := run(t, "export", "--project", "demo", "--to", rBundle, "--out", out, "--key", opFile); code != ExitOK {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, errOut)
	}
	data, _ = os.ReadFile(out)
	opKey, err := gate.ReadOperatorKey(opFile)
	if err != nil {
		t.Fatal(err)
	}
	return data, rKey, opKey
}

// TestImportRefusesTampered: each change to a bundle after export is refused by import, naming
// the part, and nothing is written.
func TestImportRefusesTampered(t *testing.T) {
	data, rKey, opKey := exportedBundle(t)
	for _, tc := range bundletest.Tamperings(t, data, opKey) {
		t.Run(tc.Name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "x.tar")
			os.WriteFile(file, tc.Data, 0o600)
			into := filepath.Join(t.TempDir(), "r")
			code, _, errOut := run(t, "import", file, "--key", rKey, "--into", into)
			if code != ExitRefused || !strings.Contains(errOut, tc.Want) {
				t.Errorf("import: exit %d, %s\nwant exit 1 naming %q", code, errOut, tc.Want)
			}
			if _, err := os.Stat(into); err == nil {
				t.Error("import wrote the folder of a refused bundle")
			}
		})
	}
}

// TestExportRecordsAFailedAudit: a log that does not verify still leaves a bundle, which says so,
// and export exits 1 naming the log.
func TestExportRecordsAFailedAudit(t *testing.T) {
	opKey, opPub, _, rBundle := exitKeys(t)
	s := newExitStack(t, opPub)
	netLog := filepath.Join(s.root, "demo_audit-net", "_data", audit.FileName)
	editFile(t, netLog, func(b []byte) []byte { return bytes.Replace(b, []byte("evil.example"), []byte("good.example"), 1) })
	out := filepath.Join(t.TempDir(), "export.tar")
	code, stdout, errOut := run(t, "export", "--project", "demo", "--to", rBundle, "--out", out, "--key", opKey)
	if code != ExitRefused || !strings.Contains(errOut, "1 of 3 audit logs do not verify") || !strings.Contains(stdout, "audit/net.jsonl:") {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no bundle written: %v", err)
	}
	b, err := bundle.Read(data)
	if err != nil || b.Header().AuditOK || !bytes.Contains(bundletest.Part(t, data, bundle.VerifyPath), []byte(`"ok": false`)) {
		t.Errorf("the bundle does not record the failure: %v", err)
	}
}

func TestExportRefuses(t *testing.T) {
	opKey, opPub, _, rBundle := exitKeys(t)
	s := newExitStack(t, opPub)
	kmsBundle := filepath.Join(t.TempDir(), "kms.bundle")
	os.WriteFile(kmsBundle, s.kms.Public().Marshal(), 0o644)
	_, otherPub, _, _ := exitKeys(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) []string
		code  int
		want  string
	}{
		{"a kms bundle as recipient", func(*testing.T) []string { return []string{"--to", kmsBundle} }, ExitUsage, "export re-seals to a person's recipient key"},
		{"an unknown secret", func(*testing.T) []string { return []string{"--secrets", "nope"} }, ExitRefused, "kms refused order"},
		{"no such project", func(*testing.T) []string { return []string{"--project", "other"} }, ExitRefused, "kms's gate volume"},
		{"kms pins another operator key", func(t *testing.T) []string {
			s2 := newExitStack(t, otherPub)
			_ = s2
			return nil
		}, ExitRefused, "approval_bad_signature"},
		{"kms does not answer", func(t *testing.T) []string {
			s.stop()
			return []string{"--timeout", "100ms"}
		}, ExitRefused, "kms did not answer order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "export.tar")
			args := append([]string{"export", "--project", "demo", "--to", rBundle, "--out", out, "--key", opKey}, tc.setup(t)...)
			code, _, errOut := run(t, args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, %s\nwant exit %d naming %q", code, errOut, tc.code, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused export wrote its file")
			}
			if entries, _ := os.ReadDir(filepath.Join(s.root, "demo_gate-kms", "_data", "orders")); len(entries) != 0 {
				t.Errorf("an order is left behind: %v", entries)
			}
		})
	}
}
