//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/internal/seal"
)

// infra is every service of the stack and its offline world but the agent: what must run, and
// have a sealed key, before the agent talks to the model.
var infra = []string{"launcher", "net", "llm", "kms", "bash", "fs", "world", "model"}

// apiKey is a throwaway key a test seals to kms, as a person seals a real one. The offline model
// accepts this key alone (MODEL_EXPECT_KEY_SHA256), so an answer proves it is what arrived.
type apiKey struct{ value, sha256 string }

func newAPIKey(t *testing.T) apiKey {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	v := "sk-ant-api03-offline-" + hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(v))
	return apiKey{value: v, sha256: hex.EncodeToString(sum[:])}
}

// keyEnv is what the stack needs for a sealed key: where kms finds sealed secrets (a fresh
// folder) and the key the offline model expects.
func keyEnv(t *testing.T, k apiKey) (env []string, secrets string) {
	t.Helper()
	secrets = filepath.Join(t.TempDir(), "secrets")
	if err := os.Mkdir(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(secrets), 0o755) // kms reads it under its own uid
	return []string{"SHARNESS_AI_SECRETS_DIR=" + secrets, "SHARNESS_MODEL_EXPECT_KEY_SHA256=" + k.sha256}, secrets
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// sharnessAI is the CLI, built once for the whole run.
func sharnessAI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sharness-e2e-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "sharness-ai")
		cmd := exec.Command("go", "build", "-o", cliPath, "./cmd/sharness-ai")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = err
			t.Logf("go build sharness-ai:\n%s", out)
		}
	})
	if cliErr != nil {
		t.Fatalf("build sharness-ai: %v", cliErr)
	}
	return cliPath
}

// cli runs sharness-ai with the stack's environment, stdin as given.
func (s *stack) cli(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, sharnessAI(s.t), args...)
	cmd.Env, cmd.Dir, cmd.Stdin = s.env, s.root, strings.NewReader(stdin)
	return cmd.CombinedOutput()
}

// upInfra starts every service but the agent and waits until they run.
func (s *stack) upInfra(ctx context.Context) {
	s.t.Helper()
	if out, err := s.compose(ctx, append([]string{"up", "--pull", "never", "--detach", "--wait"}, infra...)...); err != nil {
		s.t.Fatalf("docker compose up %v: %v\n%s\nllm:\n%s\nkms:\n%s", infra, err, out, s.logs("llm"), s.logs("kms"))
	}
}

// sealKey does what the README tells a person to do: fetch the running kms's public bundle and
// seal the key to it, into the folder kms reads. A kms that restarted has a new identity; not
// names the one it had, whose bundle must not be used again. It returns the fingerprint sealed to.
func (s *stack) sealKey(ctx context.Context, k apiKey, secrets, not string) string {
	s.t.Helper()
	bundle := filepath.Join(s.t.TempDir(), "bundle.json")
	args := []string{"kms", "bundle", "-p", project, "--wait", "30s", "--out", bundle}
	for _, f := range s.files {
		args = append(args, "-f", f)
	}
	var fp string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if out, err := s.cli(ctx, "", args...); err != nil {
			s.t.Fatalf("sharness-ai %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		data, err := os.ReadFile(bundle)
		if err != nil {
			s.t.Fatal(err)
		}
		b, err := seal.ParseBundle(data)
		if err != nil {
			s.t.Fatalf("the bundle sharness-ai wrote: %v", err)
		}
		if fp = b.Fingerprint(); fp != not {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kms still shows its old identity %s", not)
		}
	}
	if out, err := s.cli(ctx, k.value, "secret", "seal", "--to", bundle, "--out", secrets, "anthropic-api-key"); err != nil {
		s.t.Fatalf("sharness-ai secret seal: %v\n%s", err, out)
	} else if strings.Contains(string(out), k.value) {
		s.t.Fatalf("sharness-ai secret seal printed the secret:\n%s", out)
	}
	return fp
}

// sealed is what withKey set up: the key, the folder kms reads it from, and the fingerprint of
// the kms identity it is sealed to.
type sealed struct {
	key         apiKey
	secrets, fp string
}

// withKey starts the infrastructure with a freshly sealed key.
func withKey(t *testing.T, env ...string) (*stack, sealed) {
	t.Helper()
	k := newAPIKey(t)
	kenv, secrets := keyEnv(t, k)
	s := newStack(t, append(env, kenv...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s.upInfra(ctx)
	fp := s.sealKey(ctx, k, secrets, "")
	return s, sealed{key: k, secrets: secrets, fp: fp}
}
