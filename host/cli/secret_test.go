package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/images/kms/custody"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

const testSecret = "sk-ant-api03-cli-test"

func withInput(t *testing.T, s string) {
	t.Helper()
	old := secretInput
	secretInput = strings.NewReader(s)
	t.Cleanup(func() { secretInput = old })
}

// kmsFor starts an in-process kms for the full fixture reading dir, served over mTLS, and
// returns it with a client acting as llm.
func kmsFor(t *testing.T, dir string) (*custody.Server, *kms.Client) {
	t.Helper()
	m, err := pbp.Load(os.DirFS(filepath.Join(repoRoot, "policies/testdata/full")), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := custody.New(custody.Config{Manifest: m, Self: "kms", SecretsDir: dir, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Destroy)
	ca := mtlstest.NewCA(t, m.TrustDomain)
	ts := httptest.NewUnstartedServer(srv)
	ts.Listener = tls.NewListener(ts.Listener, mtls.ServerConfig(ca.SVID(t, "kms"), ca.Bundle(), m, "kms"))
	ts.Start()
	t.Cleanup(ts.Close)
	cc, err := mtls.ClientConfig(ca.SVID(t, "llm"), ca.Bundle(), m, "llm", "kms")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cc}}
	t.Cleanup(hc.CloseIdleConnections)
	return srv, kms.NewClient(hc, "https://"+ts.Listener.Addr().String(), m.Hash)
}

// TestSecretSealListOpen: seal from stdin to a kms bundle, list it, and have that kms open it.
func TestSecretSealListOpen(t *testing.T) {
	t.Chdir(t.TempDir())
	srv, client := kmsFor(t, "sealed")
	os.WriteFile("bundle.json", append(srv.Public().Marshal(), '\n'), 0o644)
	if code, _, errOut := run(t, "keygen", "--dir", "k"); code != ExitOK {
		t.Fatal(errOut)
	}
	withInput(t, testSecret+"\n")
	code, out, errOut := run(t, "secret", "seal", "--to", "bundle.json", "--key", "k/signing.key", "--expires", "2h", "--out", "sealed", "api-key")
	if code != ExitOK {
		t.Fatalf("seal: exit %d %s", code, errOut)
	}
	fp := srv.Public().Fingerprint()
	if !strings.Contains(out, "sealed api-key to kms "+fp) || !strings.Contains(out, "signed by ed25519:") || strings.Contains(out+errOut, testSecret) {
		t.Errorf("seal output:\n%s%s", out, errOut)
	}
	st, err := os.Stat("sealed/api-key.sealed")
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("sealed file: %v %v", st, err)
	}

	code, out, _ = run(t, "secret", "list", "--dir", "sealed", "--json")
	var rows []listed
	if err := json.Unmarshal([]byte(out), &rows); code != ExitOK || err != nil || len(rows) != 1 {
		t.Fatalf("list --json: exit %d, %v:\n%s", code, err, out)
	}
	r := rows[0]
	exp, _ := time.Parse(time.RFC3339, r.Expires)
	if r.Name != "api-key" || r.To != fp || !strings.HasPrefix(r.Sender, "signed by ed25519:") || r.Expired || time.Until(exp) < 119*time.Minute {
		t.Errorf("list row %+v", r)
	}
	if code, out, _ = run(t, "secret", "list", "--dir", "sealed"); code != ExitOK || !strings.Contains(out, "api-key  "+fp) || strings.Contains(out, testSecret) {
		t.Errorf("list: exit %d\n%s", code, out)
	}

	got, err := client.Unwrap(context.Background(), "api-key")
	if err != nil || string(got) != testSecret {
		t.Fatalf("kms opens %q, %v; want the secret without its newline", got, err)
	}
}

func TestSecretSealRefuses(t *testing.T) {
	t.Chdir(t.TempDir())
	sk, _ := seal.GenerateKey()
	b, _ := seal.NewBundle(sk.PublicKey(), "sha256:"+strings.Repeat("a", 64), time.Now(), map[string]string{"mlockall": "degraded: EPERM"})
	os.WriteFile("bundle.json", b.Marshal(), 0o644)
	os.WriteFile("bad.json", []byte(`{"v":1}`), 0o644)
	for _, tc := range []struct {
		name, input string
		args        []string
		want        string
	}{
		{"empty", "", nil, "empty"},
		{"only a newline", "\n", nil, "empty"},
		{"too long", strings.Repeat("x", seal.MaxSecret+1), nil, "more than 8192 bytes"},
		{"bad name", "x", []string{"secret", "seal", "--to", "bundle.json", "--out", "out", "API KEY"}, "not a secret name"},
		{"no recipient", "x", []string{"secret", "seal", "--out", "out", "k"}, `"to" not set`},
		{"bad bundle", "x", []string{"secret", "seal", "--to", "bad.json", "--out", "out", "k"}, "kms bundle"},
		{"bad expiry", "x", []string{"secret", "seal", "--to", "bundle.json", "--expires", "-1h", "--out", "out", "k"}, "positive duration"},
		{"bad key", "x", []string{"secret", "seal", "--to", "bundle.json", "--key", "bundle.json", "--out", "out", "k"}, "private key"},
		{"value in argv", "x", []string{"secret", "seal", "--to", "bundle.json", "--out", "out", "k", "sk-value"}, "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withInput(t, tc.input)
			args := tc.args
			if args == nil {
				args = []string{"secret", "seal", "--to", "bundle.json", "--out", "out", "k"}
			}
			code, _, errOut := run(t, args...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, ExitUsage, tc.want)
			}
			if _, err := os.Stat("out"); err == nil {
				t.Error("a refused seal wrote a file")
			}
		})
	}
	withInput(t, strings.Repeat("x", seal.MaxSecret)+"\r\n")
	code, _, errOut := run(t, "secret", "seal", "--to", "bundle.json", "--out", "out", "k")
	if code != ExitOK || !strings.Contains(errOut, "warning: kms "+b.Fingerprint()+" runs with mlockall degraded: EPERM") {
		t.Errorf("8192 bytes and CRLF: exit %d, stderr %q; want sealed, with the hygiene warning", code, errOut)
	}
}

func TestSecretListInvalid(t *testing.T) {
	t.Chdir(t.TempDir())
	sk, _ := seal.GenerateKey()
	s, _ := seal.Seal(sk.PublicKey(), "good", []byte("v"), time.Now().Add(-time.Minute), nil)
	os.Mkdir("d", 0o755)
	os.WriteFile("d/good.sealed", s.Marshal(), 0o644)
	os.WriteFile("d/renamed.sealed", s.Marshal(), 0o644)
	os.WriteFile("d/junk.sealed", []byte("{}"), 0o644)
	code, out, errOut := run(t, "secret", "list", "--dir", "d")
	if code != ExitRefused || !strings.Contains(errOut, "2 of 3 sealed files in d are invalid") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{`(?m)^good +sha256:\w+ +\S+ \(expired\) +unsigned$`, `(?m)^d/junk.sealed +invalid: sealed secret: version 0, want 1$`,
		`(?m)^d/renamed.sealed +invalid: the file holds secret "good", kms looks for it as good.sealed$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := run(t, "secret", "list", "--dir", "empty", "--json"); code != ExitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("empty folder: exit %d %q", code, out)
	}
}

func TestKMSBundle(t *testing.T) {
	t.Chdir(t.TempDir())
	bundle := func() *seal.Bundle {
		sk, _ := seal.GenerateKey()
		b, _ := seal.NewBundle(sk.PublicKey(), "sha256:"+strings.Repeat("b", 64), time.Now(), map[string]string{"mlockall": "ok"})
		return b
	}
	old, cur := bundle(), bundle()
	var logs string
	var gotArgs []string
	orig := composeLogs
	calls := 0
	composeLogs = func(_ context.Context, project string, files []string) ([]byte, error) {
		gotArgs = append([]string{project}, files...)
		calls++
		return []byte(logs), nil
	}
	t.Cleanup(func() { composeLogs = orig })

	logs = seal.BundleLogPrefix + string(old.Marshal()) + "\n{\"level\":\"INFO\"}\r\n" + seal.BundleLogPrefix + string(cur.Marshal()) + "\r\n{\"msg\":\"serving\"}\n"
	code, out, errOut := run(t, "kms", "bundle", "-p", "demo", "-f", "compose.yml", "-f", "world.yml")
	if code != ExitOK || out != string(cur.Marshal())+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the last bundle", code, out, errOut)
	}
	if !slices.Equal(gotArgs, []string{"demo", "compose.yml", "world.yml"}) {
		t.Errorf("compose logs called with %q", gotArgs)
	}
	// A kms serving another policy than the supplied one gets no bundle handed out.
	t.Setenv("SHARNESS_AI_POLICY_HASH", "sha256:"+strings.Repeat("c", 64))
	if code, _, errOut := run(t, "kms", "bundle"); code != ExitRefused || !strings.Contains(errOut, "not the supplied SHARNESS_AI_POLICY_HASH") {
		t.Errorf("another policy: exit %d, stderr %q; want a refusal", code, errOut)
	}
	t.Setenv("SHARNESS_AI_POLICY_HASH", "")
	code, out, _ = run(t, "kms", "bundle", "--out", "b/bundle.json")
	data, _ := os.ReadFile("b/bundle.json")
	if b, err := seal.ParseBundle(data); code != ExitOK || err != nil || b.Fingerprint() != cur.Fingerprint() || !strings.Contains(out, "wrote b/bundle.json: kms "+cur.Fingerprint()) {
		t.Fatalf("--out: exit %d, %v, %q", code, err, out)
	}
	for name, l := range map[string]string{
		"no bundle line": "{\"msg\":\"starting\"}\n",
		"invalid last":   seal.BundleLogPrefix + string(cur.Marshal()) + "\n" + seal.BundleLogPrefix + "{\"v\":1}\n",
	} {
		logs = l
		if code, _, errOut := run(t, "kms", "bundle"); code != ExitRefused || !strings.Contains(strings.ToLower(errOut), "bundle") {
			t.Errorf("%s: exit %d, stderr %q; want a refusal", name, code, errOut)
		}
	}
	// --wait keeps asking until the deadline before it refuses.
	calls = 0
	logs = "{\"msg\":\"starting\"}\n"
	if code, _, _ := run(t, "kms", "bundle", "--wait", "1200ms"); code != ExitRefused || calls < 2 {
		t.Errorf("--wait: exit %d after %d calls; want a refusal after several", code, calls)
	}
}
