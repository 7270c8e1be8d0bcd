//go:build e2e

package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

// recordComponents are the components that keep an audit log in the default stack.
var recordComponents = []string{"bash", "fs", "kms", "launcher", "llm", "net"}

// checkRecord runs on the stack TestWall just used: every component's audit log verifies from
// the host (`sharness-ai audit verify --project`) while the stack runs; a component killed and
// started again continues its chain; once the stack stops, every log ends with its signed
// shutdown checkpoint and verifies strictly; copies of a log tampered with in every way
// (checkTampered) each fail with the line and the reason; and a log of this session fails as a
// log of another session once a second session has begun (checkAnotherSession).
func checkRecord(t *testing.T, s *stack, ctx context.Context) {
	verify := func(t *testing.T, args ...string) ([]byte, error) {
		return s.cli(ctx, "", append([]string{"audit", "verify", "--json", "--project", project}, args...)...)
	}
	type result struct {
		File   string
		OK     bool
		Report struct {
			Component string
			Lines     int
			Final     bool
			Failures  []struct {
				Line   int
				Reason string
			}
		}
	}
	parse := func(t *testing.T, out []byte) []result {
		t.Helper()
		var rs []result
		if err := json.Unmarshal(out, &rs); err != nil {
			var wrapped struct{ Logs []result }
			if err2 := json.Unmarshal(out, &wrapped); err2 != nil || len(wrapped.Logs) == 0 {
				t.Fatalf("audit verify --json printed %s (%v)", out, err)
			}
			rs = wrapped.Logs
		}
		return rs
	}
	t.Run("running", func(t *testing.T) {
		out, err := verify(t, "--allow-running")
		if err != nil {
			t.Fatalf("audit verify of the running stack: %v\n%s", err, out)
		}
		var seen []string
		for _, r := range parse(t, out) {
			seen = append(seen, r.Report.Component)
			if !r.OK || r.Report.Lines < 2 {
				t.Errorf("%s: ok=%v, %d lines", r.File, r.OK, r.Report.Lines)
			}
		}
		slices.Sort(seen)
		if !slices.Equal(seen, recordComponents) {
			t.Errorf("verified the logs of %v, want %v", seen, recordComponents)
		}
	})
	t.Run("restart-continues", func(t *testing.T) {
		for _, args := range [][]string{{"kill", "net"}, {"up", "--pull", "never", "--detach", "--wait", "--no-deps", "net"}} {
			if out, err := s.compose(ctx, args...); err != nil {
				t.Fatalf("docker compose %v: %v\n%s", args, err, out)
			}
		}
		if out, err := verify(t, "--allow-running"); err != nil {
			t.Fatalf("audit verify after net was killed and restarted: %v\n%s", err, out)
		}
	})
	if out, err := s.compose(ctx, "stop", "--timeout", "20"); err != nil {
		t.Fatalf("docker compose stop: %v\n%s", err, out)
	}
	t.Run("stopped", func(t *testing.T) {
		out, err := verify(t)
		if err != nil {
			t.Fatalf("audit verify of the stopped stack (every log must end signed): %v\n%s", err, out)
		}
		for _, r := range parse(t, out) {
			if !r.Report.Final {
				t.Errorf("%s: no shutdown checkpoint at its end", r.File)
			}
		}
	})
	t.Run("tampered", func(t *testing.T) { checkTampered(t, s, ctx) })
	t.Run("another-session", func(t *testing.T) { checkAnotherSession(t, s) })
}

// checkTampered edits copies of fs's log, each one way, and requires `audit verify` to refuse
// each, naming the line and the reason: a changed, deleted, inserted or reordered line, a log cut
// at a line or mid-line, its last checkpoint re-signed with a key of another CA (a valid
// signature: the forgery is checked against its own CA), a checkpoint carrying another
// component's SVID of the same session, and the log verified under another policy hash.
func checkTampered(t *testing.T, s *stack, ctx context.Context) {
	dir, ca := copyLogs(t, ctx)
	lines := logLines(t, filepath.Join(dir, "fs.jsonl"))
	if len(lines) < 4 {
		t.Fatalf("fs's log has %d lines: too few to tamper with", len(lines))
	}
	last := len(lines) // the shutdown checkpoint
	kmsLines := logLines(t, filepath.Join(dir, "kms.jsonl"))
	caCert := readCert(t, ca)
	forger := mtlstest.NewCA(t, caCert.URIs[0].Host) // the session's trust domain, another CA
	forged := forger.SVID(t, "fs")
	for _, tc := range []struct {
		name string
		edit func(*testing.T, []string) []string
		args []string // more flags for verify
		want string   // a regular expression for the failure: "fs.jsonl:<line>: <reason>"
	}{
		{"changed", func(_ *testing.T, l []string) []string {
			l[1] = strings.Replace(l[1], `"time":"20`, `"time":"19`, 1)
			return l
		}, nil,
			`fs\.jsonl:3: prev is not the hash of line 2`},
		{"deleted", func(_ *testing.T, l []string) []string { return slices.Delete(l, 1, 2) }, nil, `fs\.jsonl:2: seq 3 follows seq 1`},
		{"inserted", func(_ *testing.T, l []string) []string { return slices.Insert(l, 2, l[1]) }, nil, `fs\.jsonl:3: seq 2 follows seq 2`},
		{"reordered", func(_ *testing.T, l []string) []string { l[1], l[2] = l[2], l[1]; return l }, nil, `fs\.jsonl:2: seq 3 follows seq 1`},
		{"truncated", func(_ *testing.T, l []string) []string { return l[:len(l)-1] }, nil,
			fmt.Sprintf(`fs\.jsonl:%d: (unsigned tail after line [0-9]+|no shutdown checkpoint)`, last-1)},
		{"cut-mid-line", func(_ *testing.T, l []string) []string { l[len(l)-1] = l[len(l)-1][:40]; return l }, nil,
			fmt.Sprintf(`fs\.jsonl:%d: unterminated last line of 40 bytes`, last)},
		{"re-signed-by-another-ca", func(t *testing.T, l []string) []string {
			l[len(l)-1] = resign(t, l[len(l)-1], forged.Certificates, forged.PrivateKey)
			requireValidForgery(t, l, forger.Cert())
			return l
		}, nil, fmt.Sprintf(`fs\.jsonl:%d: checkpoint: the signer is no SVID of this session`, last)},
		{"another-components-svid", func(t *testing.T, l []string) []string {
			l[len(l)-1] = withCerts(t, l[len(l)-1], kmsLines[len(kmsLines)-1])
			return l
		}, nil, fmt.Sprintf(`fs\.jsonl:%d: checkpoint: signed by spiffe://%s/kms, not by component fs`, last, regexp.QuoteMeta(caCert.URIs[0].Host))},
		{"another-policy", func(_ *testing.T, l []string) []string { return l }, []string{"--policy-hash", "sha256:" + strings.Repeat("0", 64)},
			`fs\.jsonl:1: component fs policy sha256:[0-9a-f]{64}, want fs policy sha256:0{64} \(another component's log, or another policy\)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.edit(t, slices.Clone(lines))
			path := filepath.Join(t.TempDir(), "fs.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(bad, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := s.cli(ctx, "", append(append([]string{"audit", "verify", "--ca", ca}, tc.args...), path)...)
			if err == nil || !regexp.MustCompile(tc.want).Match(out) {
				t.Errorf("a %s log: verify %v, want a failure matching %s:\n%s", tc.name, err, tc.want, out)
			}
		})
	}
}

// checkAnotherSession starts a second session (a new launcher on the stopped stack mints a new
// CA) and requires that a log of the first session fails against it, at line 1, as a log of
// another session; and that `audit verify --project` now fails every volume still holding the
// first session's log while the new launcher's log verifies.
func checkAnotherSession(t *testing.T, s *stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, firstCA := copyLogs(t, ctx)
	for _, args := range [][]string{{"up", "--pull", "never", "--detach", "--wait", "--no-deps", "launcher"}, {"stop", "--timeout", "20", "launcher"}} {
		if out, err := s.compose(ctx, args...); err != nil {
			t.Fatalf("docker compose %v: %v\n%s", args, err, out)
		}
	}
	_, secondCA := copyLogs(t, ctx)
	if a, b := readCert(t, firstCA), readCert(t, secondCA); a.Equal(b) {
		t.Fatal("the restarted launcher's session record names the first session's CA: no second session")
	}
	out, err := s.cli(ctx, "", "audit", "verify", "--ca", secondCA, filepath.Join(first, "fs.jsonl"))
	want := regexp.MustCompile(`fs\.jsonl:1: session CA [0-9a-f]{64}, want [0-9a-f]{64}: a log of another session`)
	if err == nil || !want.Match(out) {
		t.Errorf("the first session's fs log against the second session's CA: verify %v, want %s:\n%s", err, want, out)
	}
	out, err = s.cli(ctx, "", "audit", "verify", "--project", project)
	for _, w := range []string{
		project + `_audit-fs/_data/audit\.jsonl:1: session CA [0-9a-f]{64}, want [0-9a-f]{64}: a log of another session`,
		`ok: \S*` + project + `_audit-launcher/_data/audit\.jsonl: launcher`,
	} {
		if err == nil || !regexp.MustCompile(w).Match(out) {
			t.Errorf("audit verify --project after a second session began: %v, want %s:\n%s", err, w, out)
		}
	}
}

// logLines reads a log as its lines, each with its newline.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	return lines[:len(lines)-1] // the empty string after the last newline
}

func readCert(t *testing.T, pemFile string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM block", pemFile)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkpointSigDomain prefixes what a checkpoint's key signs (internal/audit's sigDomain).
const checkpointSigDomain = "sharness-ai audit checkpoint v1\n"

// resign re-signs a checkpoint line as internal/audit signs one, with key and its chain certs,
// dated now (the forger's certificate is younger than the line): ECDSA over the SHA-256 of the
// domain and the line without its sig.
func resign(t *testing.T, line string, certs []*x509.Certificate, key crypto.Signer) string {
	t.Helper()
	line = strings.TrimSuffix(line, "\n")
	line = regexp.MustCompile(`"time":"[^"]*"`).ReplaceAllLiteralString(line, `"time":"`+time.Now().UTC().Format(time.RFC3339Nano)+`"`)
	i, j := strings.Index(line, `,"certs":[`), strings.Index(line, `,"prev":"`)
	if i < 0 || j < i {
		t.Fatalf("not a checkpoint line: %s", line)
	}
	var encoded []string
	for _, c := range certs {
		encoded = append(encoded, `"`+base64.StdEncoding.EncodeToString(c.Raw)+`"`)
	}
	head := line[:i] + `,"certs":[` + strings.Join(encoded, ",") + `]`
	sum := sha256.Sum256([]byte(checkpointSigDomain + head + line[j:]))
	sig, err := key.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return head + `,"sig":"` + base64.StdEncoding.EncodeToString(sig) + `"` + line[j:] + "\n"
}

// requireValidForgery checks the forgery itself: verified against the forger's CA, the re-signed
// last line raises no failure, so the refusal under the session's CA is the signer's, not a
// malformed line's.
func requireValidForgery(t *testing.T, lines []string, forgerCA *x509.Certificate) {
	t.Helper()
	var policy struct {
		Policy string `json:"policy"`
	}
	json.Unmarshal([]byte(lines[0]), &policy)
	rep, _ := audit.Scan(strings.NewReader(strings.Join(lines, "")), &audit.Trust{CA: forgerCA, Policy: policy.Policy}, nil)
	for _, f := range rep.Failures {
		if f.Line == len(lines) {
			t.Fatalf("the forged checkpoint fails against its own CA (the forgery is malformed): line %d: %s", f.Line, f.Reason)
		}
	}
}

// withCerts puts the certs of checkpoint line from (another component's) into checkpoint line.
func withCerts(t *testing.T, line, from string) string {
	t.Helper()
	certs := regexp.MustCompile(`"certs":\[[^\]]*\]`)
	c := certs.FindString(from)
	if c == "" || !certs.MatchString(line) {
		t.Fatalf("not checkpoint lines:\n%s\n%s", line, from)
	}
	return certs.ReplaceAllLiteralString(line, c)
}

// copyLogs copies every audit log of the project's volumes into a folder as <component>.jsonl,
// and writes the session CA from the launcher's session record as PEM.
func copyLogs(t *testing.T, ctx context.Context) (dir, caPEM string) {
	t.Helper()
	dir = t.TempDir()
	for _, c := range recordComponents {
		data, err := os.ReadFile(filepath.Join(volumeDir(t, ctx, "audit-"+c), "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c+".jsonl"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if c != "launcher" {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			var rec struct {
				Action string            `json:"action"`
				Fields map[string]string `json:"fields"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Action == "session_start" {
				der, err := base64.StdEncoding.DecodeString(rec.Fields["ca_cert"])
				if err != nil {
					t.Fatalf("the session record's ca_cert: %v", err)
				}
				caPEM = filepath.Join(dir, "ca.pem")
				if err := os.WriteFile(caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if caPEM == "" {
		t.Fatal("the launcher's log has no session record with the CA")
	}
	return dir, caPEM
}
