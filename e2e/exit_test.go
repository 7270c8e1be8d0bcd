//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// TestExit is docs/exit.md's workflow on the real stack: with an operator key, the person seals
// the API key to kms and the agent's model call works; `sharness-ai export` has kms re-seal the
// key to the person's recipient key (an order in kms's gate volume, no endpoint) and writes one
// bundle with the policy and the audit logs, which verify, and which holds the key in no
// spelling; the stack goes down (its volumes with it); a new stack comes up, `sharness-ai import`
// checks the bundle, restores the policy and the logs and re-seals the key to the new kms; and
// the model call works again, which proves the key that reached the offline model is the
// original (it accepts that key alone).
func TestExit(t *testing.T) {
	root := repoRoot(t)
	hash := policyHash(t, root)
	keys := t.TempDir()
	rKey, rBundle := filepath.Join(keys, "me.key"), filepath.Join(keys, "me.bundle")
	opKey, opPub := operatorInit(t)
	if out, err := exec.Command(sharnessAI(t), "recipient", "init", "--key", rKey).CombinedOutput(); err != nil {
		t.Fatalf("sharness-ai recipient init: %v\n%s", err, out)
	}
	k := newAPIKey(t)
	leaks := func(t *testing.T, where string, data []byte) {
		t.Helper()
		for _, f := range []string{k.value, base64.StdEncoding.EncodeToString([]byte(k.value)), base64.RawURLEncoding.EncodeToString([]byte(k.value)),
			hex.EncodeToString([]byte(k.value)), url.QueryEscape(k.value)} {
			if bytes.Contains(data, []byte(f)) {
				t.Errorf("the API key (%.16s…) is in %s", f, where)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	base := []string{"SHARNESS_AI_POLICY_HASH=" + hash, "SHARNESS_AI_OPERATOR_PUBKEY=" + opPub}

	kenv, secrets := keyEnv(t, k)
	s := newStack(t, append(base, kenv...)...)
	s.upInfra(ctx)
	s.sealKey(ctx, k, secrets, "")
	out, err := s.run(ctx, "", "--entrypoint", "/sharness-modelprobe", "agent", "-call", "ok")
	checkOnlyDoors(t, out, err, []string{"model/call-ok"})

	bundle := filepath.Join(t.TempDir(), "export.tar")
	out, err = s.cli(ctx, "", "export", "--project", project, "--to", rBundle, "--out", bundle, "--key", opKey, "--json")
	if err != nil {
		t.Fatalf("sharness-ai export: %v\n%s\nkms:\n%s", err, out, s.logs("kms"))
	}
	leaks(t, "export's output", out)
	var exported struct {
		Secrets []string
		Audit   struct {
			OK   bool
			Logs []struct {
				File string
				OK   bool
			}
		}
	}
	if i := bytes.IndexByte(out, '{'); i < 0 || json.Unmarshal(out[i:], &exported) != nil {
		t.Fatalf("export --json printed:\n%s", out)
	}
	if len(exported.Secrets) != 1 || exported.Secrets[0] != "anthropic-api-key" || !exported.Audit.OK || len(exported.Audit.Logs) < 6 {
		t.Errorf("export: secrets %v, audit ok %v with %d logs; want the key and every component's log verified", exported.Secrets, exported.Audit.OK, len(exported.Audit.Logs))
	}
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	leaks(t, "the export bundle", data)
	// kms records the order before it answers: the exported kms log holds it (the tar is not
	// compressed, so its lines are in the bytes).
	if !bytes.Contains(data, []byte(`"action":"order","decision":"allow","caller":"operator","destination":"seal_to"`)) {
		t.Error("the bundle's kms log does not record the export order")
	}
	if kmsLog := s.logs("kms"); !strings.Contains(kmsLog, `"gate order"`) || strings.Contains(kmsLog, k.value) {
		t.Errorf("kms's log does not show the order, or shows the key:\n%s", kmsLog)
	}

	// The first stack goes, with its volumes; the bundle is all that is left of it.
	s.down()

	kenv2, secrets2 := keyEnv(t, k) // an empty secrets folder; the offline model expects the same key
	s2 := newStack(t, append(base, kenv2...)...)
	s2.upInfra(ctx)
	into := filepath.Join(t.TempDir(), "restored")
	args := []string{"import", bundle, "--key", rKey, "--into", into, "--project", project, "--secrets-dir", secrets2,
		"--wait", "30s", "--operator-pubkey", opPub}
	for _, f := range s2.files {
		args = append(args, "-f", f)
	}
	out, err = s2.cli(ctx, "", args...)
	if err != nil {
		t.Fatalf("sharness-ai import: %v\n%s", err, out)
	}
	leaks(t, "import's output", out)
	m, err := pbp.Load(os.DirFS(into), "manifest.yaml")
	if err != nil || m.Hash != hash {
		t.Errorf("the restored policy: %v (hash %v), want %s", err, m, hash)
	}
	for _, f := range []string{"audit-archive/verify.json", "audit-archive/kms.jsonl", "audit-archive/launcher.jsonl", "sealed/anthropic-api-key.sealed"} {
		if _, err := os.Stat(filepath.Join(into, f)); err != nil {
			t.Errorf("restored %s: %v", f, err)
		}
	}
	filepath.WalkDir(into, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			leaks(t, p, b)
		}
		return nil
	})
	if b, err := os.ReadFile(filepath.Join(secrets2, "anthropic-api-key.sealed")); err != nil {
		t.Fatalf("import sealed no key for the new kms: %v", err)
	} else {
		leaks(t, "the re-sealed file", b)
	}

	clearRecord(t)
	out, err = s2.run(ctx, "", "--entrypoint", "/sharness-modelprobe", "agent", "-call", "ok")
	checkOnlyDoors(t, out, err, []string{"model/call-ok"})
	for _, r := range record(t) {
		if got := headerValue(r.Header, "x-api-key"); got != "sha256:"+k.sha256 {
			t.Errorf("request %d reached the model with key %s, want the exported key's sha256:%s", r.Seq, got, k.sha256)
		}
	}
}
