package cli

// Exit (docs/exit.md): the verbs over host/exit. `sharness-ai recipient init` makes the key an
// export re-seals secrets to; `export` and `import` are exit.Export and exit.Import.

import (
	"cmp"
	"crypto/hpke"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/bundle"
	"github.com/sharness-ai/sharness/host/exit"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// exitPoll is how often export looks for kms's answer; tests shorten it.
var exitPoll = 200 * time.Millisecond

func (a *app) recipientCmd() *cobra.Command {
	c := &cobra.Command{Use: "recipient", Short: "Manage the recipient key an export re-seals secrets to"}
	var key, pub string
	initCmd := &cobra.Command{
		Use:   "init --key FILE [--bundle FILE]",
		Short: "Make a recipient key (HPKE P-256, PEM, mode 0600) and its public bundle; never overwrites",
		Long: "The bundle (default: the key's path with .bundle for .key) is what `sharness-ai export --to` seals\n" +
			"to; the key is what `sharness-ai import --key` opens with. Keep the key off the exported host.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if key == "" {
				return errors.New("no key path: pass --key")
			}
			pub = cmp.Or(pub, strings.TrimSuffix(key, ".key")+".bundle")
			for _, f := range []string{key, pub} {
				if _, err := os.Lstat(f); err == nil {
					return refused{fmt.Errorf("%s exists: refusing to overwrite it", f)}
				}
			}
			sk, err := seal.GenerateKey()
			if err != nil {
				return err
			}
			pemKey, err := seal.MarshalPrivateKey(sk)
			if err != nil {
				return err
			}
			defer clear(pemKey)
			b, err := seal.NewRecipient(sk.PublicKey(), time.Now())
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
				return err
			}
			if err := bundle.WriteNew(key, pemKey, 0o600); err != nil {
				return refused{err}
			}
			if err := bundle.WriteNew(pub, append(b.Marshal(), '\n'), 0o644); err != nil {
				return refused{err}
			}
			return a.print(map[string]string{"key": key, "bundle": pub, "fingerprint": b.Fingerprint()},
				fmt.Sprintf("wrote %s (mode 0600) and %s: recipient %s\n", key, pub, b.Fingerprint()))
		},
	}
	initCmd.Flags().StringVar(&key, "key", "", "where to write the private key")
	initCmd.Flags().StringVar(&pub, "bundle", "", "where to write the public bundle (default: the key's path, .bundle for .key)")
	c.AddCommand(initCmd)
	return c
}

func (a *app) exportCmd() *cobra.Command {
	var project, to, out, key string
	var names []string
	timeout := 2 * time.Minute
	c := &cobra.Command{
		Use:   "export --project P --to RECIPIENT.bundle --out FILE [--key OPERATOR.key] [--secrets NAME,...]",
		Short: "Write one bundle of a running stack: its policy, its secrets re-sealed by kms to a recipient, its audit logs and their verification",
		Long: "Run as root on the host of the running stack P, with the policy it runs (-f, the manifest). export signs an\n" +
			"order with the operator key and puts it in kms's gate volume P_gate-<kms>; kms checks it, re-seals the secrets\n" +
			"(all, or --secrets) to the recipient bundle from `sharness-ai recipient init`, and answers there. export then\n" +
			"copies the audit logs of P's volumes, verifies them as `audit verify --project P --allow-running` does, and\n" +
			"writes FILE (an uncompressed tar, docs/exit.md), never replacing a file. Nothing in it is in the clear.\n" +
			"Exit 0: written, every log verifies; 1: refused, or written but a log does not verify (named); 2: bad input.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case !stack.IsProject(project):
				return fmt.Errorf("--project %q is not a compose project name", project)
			case out == "" || to == "":
				return errors.New("--to and --out are required")
			case timeout <= 0 || timeout > gate.MaxTTL:
				return fmt.Errorf("--timeout %s: want a positive duration of at most %s", timeout, gate.MaxTTL)
			}
			if _, err := os.Lstat(out); err == nil {
				return refused{fmt.Errorf("%s exists: refusing to overwrite it", out)}
			}
			for _, n := range names {
				if !pbp.SecretName(n) {
					return fmt.Errorf("--secrets: %q is not a secret name", n)
				}
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			recipient, err := readBundle(to)
			if err != nil {
				return err
			}
			if !recipient.IsRecipient() {
				return fmt.Errorf("%s is a kms bundle: export re-seals to a person's recipient key (sharness-ai recipient init), which outlives a session", to)
			}
			priv, err := gate.ReadOperatorKey(key)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w (make one with `sharness-ai operator init`)", err)
			} else if err != nil {
				return refused{err}
			}
			x, err := exit.Export{Stack: a.stack(project, nil, m), Manifest: a.manifest, Recipient: recipient, Operator: priv,
				Secrets: names, Timeout: timeout, Poll: exitPoll}.Run(cmd.Context())
			if err != nil {
				return err
			}
			return a.exported(out, x)
		},
	}
	c.Flags().StringVarP(&project, "project", "p", os.Getenv("COMPOSE_PROJECT_NAME"), "compose project of the running stack (env COMPOSE_PROJECT_NAME)")
	c.Flags().StringVar(&to, "to", "", "the recipient bundle to re-seal the secrets to (from `sharness-ai recipient init`)")
	c.Flags().StringVarP(&out, "out", "o", "", "the bundle file to write; never replaced")
	c.Flags().StringSliceVar(&names, "secrets", nil, "only these secrets (default: every sealed secret kms holds)")
	c.Flags().DurationVar(&timeout, "timeout", timeout, "how long to wait for kms to carry out the order")
	keyFlag(c, &key, "the operator key that signs the order and the bundle")
	return c
}

// exported writes the bundle x to out and says what it holds: exit 1, written, when its audit
// logs do not verify.
func (a *app) exported(out string, x *exit.Exported) error {
	h, verified := x.Header, x.Audit
	if err := bundle.WriteNew(out, x.Data, 0o600); errors.Is(err, fs.ErrExist) {
		return refused{fmt.Errorf("%s exists: refusing to overwrite it", out)}
	} else if err != nil {
		return err
	}
	var text strings.Builder
	fmt.Fprintf(&text, "wrote %s: policy %s, %d secrets re-sealed by kms %s to recipient %s (%s), %d audit logs\n",
		out, h.PolicyHash, len(h.Secrets), h.KMS, h.Recipient, strings.Join(h.Secrets, ", "), len(verified.Logs))
	if verified.SessionCA != "" {
		fmt.Fprintf(&text, "audit logs: session CA sha256 %s, from %s%s\n", verified.SessionCA, verified.SessionCAFrom, compareHint(h.Project))
	}
	bad := 0
	for _, r := range verified.Logs {
		findings(&text, r)
		if !r.OK {
			bad++
		}
	}
	if verified.Error != "" {
		fmt.Fprintf(&text, "the audit logs could not be verified: %s\n", verified.Error)
	}
	if err := a.print(map[string]any{"file": out, "policy": h.PolicyHash, "kms": h.KMS, "recipient": h.Recipient, "order": h.Order,
		"secrets": h.Secrets, "audit": verified}, text.String()); err != nil {
		return err
	}
	switch {
	case verified.Error != "":
		return refused{fmt.Errorf("%s is written, but its audit logs could not be verified (%s): the bundle records it (audit/verify.json)", out, verified.Error)}
	case !verified.OK:
		return refused{fmt.Errorf("%s is written, but %d of %d audit logs do not verify: the bundle records it (audit/verify.json)", out, bad, len(verified.Logs))}
	}
	return nil
}

func (a *app) importCmd() *cobra.Command {
	var keyFile, into, project, secretsDir, policy, pin, signKey string
	var files []string
	wait := 30 * time.Second
	c := &cobra.Command{
		Use:   "import FILE --key RECIPIENT.key --into DIR [--project P]",
		Short: "Check an export bundle, restore its policy and audit logs into DIR, and re-seal its secrets to a new stack's kms",
		Long: "import checks the bundle (every part's SHA-256, the operator's signature, the policy hash recomputed from the\n" +
			"policy files), then writes DIR/manifest.yaml and its layers, DIR/audit-archive/ (the logs and their verification),\n" +
			"DIR/sealed/ (the secrets, still sealed to the recipient) and DIR/export.json, never replacing a file. With\n" +
			"--project P (a running stack) it opens each secret with the recipient key in memory only and seals it to P's kms\n" +
			"(as `kms bundle` finds it), into --secrets-dir. Exit 0: done; 1: the bundle or the new kms is refused; 2: bad input.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := bundle.ReadFile(args[0])
			if err != nil {
				return err
			}
			if pin != "" {
				want, err := gate.ParsePublicKey([]byte(pin))
				if err != nil {
					return fmt.Errorf("--operator-pubkey: %w", err)
				}
				if !want.Equal(b.Operator()) {
					return refused{fmt.Errorf("%s is signed by operator key %s, not the one given", args[0], keys.Pin(b.Operator()))}
				}
			}
			m, err := b.Policy()
			if err != nil {
				return err
			}
			rk, err := readRecipientKey(keyFile)
			if err != nil {
				return err
			}
			res, err := exit.Import{Bundle: b, Key: rk, Into: into, Stack: a.stack(project, files, nil), Wait: wait,
				Policy: policy, SignKey: signKey, SecretsDir: secretsDir}.Run(cmd.Context())
			if err != nil {
				return err
			}
			h := b.Header()
			text := fmt.Sprintf("restored %s (exported from %s at %s, signed by operator key %s) into %s: policy %s, %d audit logs (verified when exported: %v), %d secrets in %s\n",
				args[0], h.Project, h.Created, keys.Pin(b.Operator()), into, m.Hash, b.AuditLogs(), h.AuditOK, res.Secrets, filepath.Join(into, "sealed"))
			if project == "" {
				text += "the secrets remain sealed to the recipient key; import again with --project P to seal them to a new stack's kms\n"
			} else {
				warnHygiene(a.errOut, res.KMS)
				text += fmt.Sprintf("sealed %d secrets to kms %s of %s, into %s\n", res.ReSealed, res.KMS.Fingerprint(), project, secretsDir)
			}
			out := map[string]any{"dir": into, "policy": m.Hash, "operator": keys.Pin(b.Operator()), "audit_ok": h.AuditOK, "secrets": h.Secrets}
			if project != "" {
				out["kms"], out["secrets_dir"] = res.KMS.Fingerprint(), secretsDir
			}
			return a.print(out, text)
		},
	}
	c.Flags().StringVar(&keyFile, "key", "", "the recipient key the secrets are sealed to (from `sharness-ai recipient init`)")
	c.Flags().StringVar(&into, "into", "", "the folder to restore the policy and the audit logs into; no file in it is replaced")
	c.Flags().StringVarP(&project, "project", "p", "", "a running stack whose kms the secrets are sealed to (default: none, the secrets stay sealed to the recipient)")
	c.Flags().StringSliceVarP(&files, "file", "f", nil, "compose file of --project, repeatable (default: docker compose's own choice)")
	c.Flags().DurationVar(&wait, "wait", wait, "keep looking this long for the new kms's bundle")
	c.Flags().StringVar(&secretsDir, "secrets-dir", defaultSecretsDir(), "folder of sealed secrets the new kms reads (env SHARNESS_AI_SECRETS_DIR)")
	c.Flags().StringVar(&policy, "policy-hash", "", "the policy the new kms must serve (default: the bundle's)")
	c.Flags().StringVar(&pin, "operator-pubkey", os.Getenv(gate.EnvOperator), "the operator public key the bundle must be signed by (env "+gate.EnvOperator+"; default: any, printed)")
	c.Flags().StringVar(&signKey, "sign-key", "", "sign the re-sealed secrets with this Ed25519 key (for business.kms.trusted_senders)")
	_ = c.MarkFlagRequired("key")
	_ = c.MarkFlagRequired("into")
	return c
}

// readRecipientKey reads a recipient key, refusing a file that others than its owner may read
// or write: it opens every secret an export holds.
func readRecipientKey(file string) (hpke.PrivateKey, error) {
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, refused{fmt.Errorf("recipient key %s: mode %04o gives others access; chmod 600 it", file, st.Mode().Perm())}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("recipient key: %w", err)
	}
	defer clear(data)
	k, err := seal.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}
