package cli

// Exit (docs/exit.md): `sharness-ai export` takes what a running stack holds that a person may
// want elsewhere (the policy, the sealed secrets, the audit logs and whether they verify) into
// one bundle file, the secrets re-sealed by kms to a recipient key the person made with
// `sharness-ai recipient init`; `sharness-ai import` checks such a bundle, restores its files
// and, for a new stack, re-seals the secrets to that stack's kms. No secret is ever written in
// the clear: kms re-seals inside itself, and import opens each secret in memory only to seal it
// again at once.

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/gate"
	"github.com/sharness-ai/sharness/internal/kms"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// exitPoll is how often export looks for kms's answer; tests shorten it.
var exitPoll = 200 * time.Millisecond

func (a *app) recipientCmd() *cobra.Command {
	c := &cobra.Command{Use: "recipient", Short: "Manage the recipient key an export re-seals secrets to"}
	var key, bundle string
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
			bundle = cmp.Or(bundle, strings.TrimSuffix(key, ".key")+".bundle")
			for _, f := range []string{key, bundle} {
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
			if err := writeNew(key, pemKey, 0o600); err != nil {
				return refused{err}
			}
			if err := writeNew(bundle, append(b.Marshal(), '\n'), 0o644); err != nil {
				return refused{err}
			}
			return a.print(map[string]string{"key": key, "bundle": bundle, "fingerprint": b.Fingerprint()},
				fmt.Sprintf("wrote %s (mode 0600) and %s: recipient %s\n", key, bundle, b.Fingerprint()))
		},
	}
	initCmd.Flags().StringVar(&key, "key", "", "where to write the private key")
	initCmd.Flags().StringVar(&bundle, "bundle", "", "where to write the public bundle (default: the key's path, .bundle for .key)")
	c.AddCommand(initCmd)
	return c
}

// exportAudit is audit/verify.json: the audit logs' verification when they were exported.
type exportAudit struct {
	OK            bool          `json:"ok"`
	Policy        string        `json:"policy"`
	SessionCA     string        `json:"session_ca,omitempty"`
	SessionCAFrom string        `json:"session_ca_from,omitempty"`
	Running       bool          `json:"running"`         // verified as a running stack's: an unsigned tail is a notice
	Error         string        `json:"error,omitempty"` // why the logs could not be verified at all
	Logs          []auditResult `json:"logs"`
	VerifiedAt    string        `json:"verified_at"`
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
			return a.export(cmd.Context(), project, to, out, key, names, timeout)
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

func (a *app) export(ctx context.Context, project, to, out, keyFile string, names []string, timeout time.Duration) error {
	switch {
	case !projectName.MatchString(project):
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
	parts, err := a.policyParts(m)
	if err != nil {
		return err
	}
	var kmsName string
	for _, c := range m.Components {
		if c.Kind == pbp.KindKMS {
			kmsName = c.Name
		}
	}
	if kmsName == "" {
		return fmt.Errorf("the policy %s has no kms: there is nothing to export secrets from", m.Hash)
	}
	recipient, err := readBundle(to)
	if err != nil {
		return err
	}
	if !recipient.IsRecipient() {
		return fmt.Errorf("%s is a kms bundle: export re-seals to a person's recipient key (sharness-ai recipient init), which outlives a session", to)
	}
	priv, err := gate.ReadOperatorKey(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (make one with `sharness-ai operator init`)", err)
	} else if err != nil {
		return refused{err}
	}

	ans, orderID, err := a.orderSealTo(ctx, project, kmsName, m.Hash, kms.SealToOrder{Names: names, All: len(names) == 0, Recipient: recipient}, priv, timeout)
	if err != nil {
		return err
	}
	h := exportHeader{V: 1, Kind: exportKind, Created: time.Now().UTC().Format(time.RFC3339), Project: project, PolicyHash: m.Hash,
		KMS: ans.KMS.Fingerprint(), Recipient: recipient.Fingerprint(), Order: orderID, Secrets: []string{}}
	for _, s := range ans.Sealed {
		if s.To() != recipient.Fingerprint() {
			return refused{fmt.Errorf("kms answered secret %s sealed to %s, not to the recipient %s", s.Name(), s.To(), recipient.Fingerprint())}
		}
		parts["secrets/"+s.Name()+".sealed"] = s.Marshal()
		h.Secrets = append(h.Secrets, s.Name())
	}
	slices.Sort(h.Secrets)
	if len(names) > 0 && !slices.Equal(h.Secrets, slices.Sorted(slices.Values(names))) {
		return refused{fmt.Errorf("kms re-sealed %v, the order named %v", h.Secrets, names)}
	}
	if len(h.Secrets) == 0 {
		fmt.Fprintln(a.errOut, "warning: kms holds no sealed secret: the bundle has none")
	}

	verified, err := exportLogs(ctx, project, m.Hash, parts)
	if err != nil {
		return err
	}
	h.AuditOK = verified.OK
	data, err := marshalExport(h, parts, priv)
	if err != nil {
		return err
	}
	if err := writeNew(out, data, 0o600); errors.Is(err, fs.ErrExist) {
		return refused{fmt.Errorf("%s exists: refusing to overwrite it", out)}
	} else if err != nil {
		return err
	}
	var text strings.Builder
	fmt.Fprintf(&text, "wrote %s: policy %s, %d secrets re-sealed by kms %s to recipient %s (%s), %d audit logs\n",
		out, m.Hash, len(h.Secrets), h.KMS, h.Recipient, strings.Join(h.Secrets, ", "), len(verified.Logs))
	if verified.SessionCA != "" {
		fmt.Fprintf(&text, "audit logs: session CA sha256 %s, from %s%s\n", verified.SessionCA, verified.SessionCAFrom, compareHint(project))
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
	if err := a.print(map[string]any{"file": out, "policy": m.Hash, "kms": h.KMS, "recipient": h.Recipient, "order": orderID,
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

// policyParts reads the manifest named by -f, its signature if any, and its layers, as parts
// policy/..., and checks they are the policy m (its hash computed from these very bytes).
func (a *app) policyParts(m *pbp.Manifest) (map[string][]byte, error) {
	root, err := os.OpenRoot(filepath.Dir(a.manifest))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	name := filepath.Base(a.manifest)
	parts := map[string][]byte{}
	files := map[string]string{"manifest.yaml": name, "manifest.yaml.sig": name + ".sig"}
	for _, l := range m.Layers {
		files[l.File] = l.File
	}
	for part, file := range files {
		data, err := root.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) && part == "manifest.yaml.sig" {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read the policy: %w", err)
		}
		parts["policy/"+part] = data
	}
	if got, err := policyOf(parts); err != nil || got.Hash != m.Hash {
		return nil, fmt.Errorf("the policy files changed while read (%v): try again", err)
	}
	return parts, nil
}

// orderSealTo has the kms of project re-seal secrets: it signs the order into kms's gate
// volume, waits for the answer, and checks that kms runs policy.
func (a *app) orderSealTo(ctx context.Context, project, kmsName, policy string, q kms.SealToOrder, key ed25519.PrivateKey, timeout time.Duration) (kms.OrderAnswer, string, error) {
	volume := project + "_gate-" + kmsName // compile.GateVolume, as compose prefixes it
	mount, err := dockerOutput(ctx, "volume", "inspect", "--format", "{{.Mountpoint}}", volume)
	if err != nil {
		return kms.OrderAnswer{}, "", refused{fmt.Errorf("kms's gate volume: %w (is the stack up, with SHARNESS_AI_OPERATOR_PUBKEY?)", err)}
	}
	dir := strings.TrimSpace(string(mount))
	if !filepath.IsAbs(dir) {
		return kms.OrderAnswer{}, "", fmt.Errorf("volume %s: mountpoint %q is not an absolute path", volume, dir)
	}
	o, err := gate.PlaceOrder(dir, gate.Order{Component: kmsName, Op: kms.OrderSealTo, Policy: policy, Args: q.Args()}, key, timeout)
	if errors.Is(err, fs.ErrPermission) {
		return kms.OrderAnswer{}, "", fmt.Errorf("%w (Docker volumes are root's: run as root)", err)
	} else if err != nil {
		return kms.OrderAnswer{}, "", refused{err}
	}
	defer gate.Withdraw(dir, o.ID) // answered, or given up: kms must not carry it out later
	fmt.Fprintf(a.errOut, "order %s placed in %s; waiting for kms (up to %s)\n", o.ID, dir, timeout)
	deadline := time.Now().Add(timeout)
	var r gate.Result
	for {
		if r, err = gate.ReadResult(dir, o.ID); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return kms.OrderAnswer{}, "", refused{err}
		}
		if time.Now().After(deadline) {
			return kms.OrderAnswer{}, "", refused{fmt.Errorf("kms did not answer order %s within %s (is kms running with the operator's public key?)", o.ID, timeout)}
		}
		select {
		case <-ctx.Done():
			return kms.OrderAnswer{}, "", ctx.Err()
		case <-time.After(exitPoll):
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

// exportLogs copies the audit logs of project's volumes into parts, up to each one's last whole
// line (a running component may be writing one), and verifies the copies, as `audit verify
// --project --allow-running` would, into audit/verify.json. A log that does not verify is in the
// result, not an error: the bundle keeps the evidence either way.
func exportLogs(ctx context.Context, project, policy string, parts map[string][]byte) (exportAudit, error) {
	v := exportAudit{Policy: policy, Running: true, Logs: []auditResult{}, VerifiedAt: time.Now().UTC().Format(time.RFC3339)}
	logs, err := projectLogs(ctx, project)
	if err != nil {
		return v, refused{err}
	}
	tmp, err := os.MkdirTemp("", "sharness-export-")
	if err != nil {
		return v, err
	}
	defer os.RemoveAll(tmp)
	var copies []auditLog
	for _, l := range logs {
		dst := filepath.Join(tmp, l.component+".jsonl")
		copies = append(copies, auditLog{dst, l.component})
		data, err := os.ReadFile(l.file)
		if errors.Is(err, fs.ErrNotExist) {
			continue // scanLogs says the volume has no log
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
		parts["audit/"+l.component+".jsonl"] = data
	}
	t := auditTrust{project: project, policy: policy, running: true}
	tr, source, err := t.trust(copies)
	if err == nil {
		v.SessionCA, v.SessionCAFrom = audit.CAHash(tr.CA), strings.ReplaceAll(source, tmp, "audit")
		v.Logs, err = scanLogs(copies, &tr, func(string, audit.Entry) {})
	}
	if err != nil {
		v.Error = err.Error()
	}
	v.OK = err == nil
	for i := range v.Logs {
		v.Logs[i].File = "audit/" + filepath.Base(v.Logs[i].File)
		v.OK = v.OK && v.Logs[i].OK
	}
	parts[exportVerifyPath], _ = json.MarshalIndent(v, "", "  ")
	return v, nil
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
			b, err := readExportFile(args[0])
			if err != nil {
				return err
			}
			if pin != "" {
				want, err := gate.ParsePublicKey([]byte(pin))
				if err != nil {
					return fmt.Errorf("--operator-pubkey: %w", err)
				}
				if !want.Equal(b.operator) {
					return refused{fmt.Errorf("%s is signed by operator key %s, not the one given", args[0], pbp.PinString(b.operator))}
				}
			}
			m, err := policyOf(b.parts)
			if err != nil {
				return refused{fmt.Errorf("the bundle's policy: %w", err)}
			}
			if m.Hash != b.header.PolicyHash {
				return refused{fmt.Errorf("the bundle's policy files hash to %s, its manifest says %s", m.Hash, b.header.PolicyHash)}
			}
			rk, err := readRecipientKey(keyFile)
			if err != nil {
				return err
			}
			sealed, err := sealedParts(b, seal.Fingerprint(rk.PublicKey()))
			if err != nil {
				return refused{err}
			}
			var reSealed map[string][]byte
			var to *seal.Bundle
			if project != "" {
				if to, err = a.waitKMSBundle(cmd.Context(), project, files, wait); err != nil {
					return err
				}
				if want := cmp.Or(policy, b.header.PolicyHash); to.PolicyHash() != want {
					return refused{fmt.Errorf("the kms of %s serves policy %s, not %s: refusing to seal to it (--policy-hash names another)", project, to.PolicyHash(), want)}
				}
				if reSealed, err = reseal(sealed, rk, to, signKey); err != nil {
					return refused{err}
				}
			}
			if err := restore(into, b); err != nil {
				return err
			}
			logs := 0
			for p := range b.parts {
				if auditPart.MatchString(p) {
					logs++
				}
			}
			text := fmt.Sprintf("restored %s (exported from %s at %s, signed by operator key %s) into %s: policy %s, %d audit logs (verified when exported: %v), %d secrets in %s\n",
				args[0], b.header.Project, b.header.Created, pbp.PinString(b.operator), into, m.Hash, logs, b.header.AuditOK, len(sealed), filepath.Join(into, "sealed"))
			if project == "" {
				text += "the secrets remain sealed to the recipient key; import again with --project P to seal them to a new stack's kms\n"
			} else {
				if err := artefact.Write(secretsDir, reSealed); err != nil {
					return err
				}
				warnHygiene(a.errOut, to)
				text += fmt.Sprintf("sealed %d secrets to kms %s of %s, into %s\n", len(reSealed), to.Fingerprint(), project, secretsDir)
			}
			res := map[string]any{"dir": into, "policy": m.Hash, "operator": pbp.PinString(b.operator), "audit_ok": b.header.AuditOK, "secrets": b.header.Secrets}
			if project != "" {
				res["kms"], res["secrets_dir"] = to.Fingerprint(), secretsDir
			}
			return a.print(res, text)
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

func readExportFile(file string) (*exportBundle, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxExport+1))
	if err != nil {
		return nil, err
	}
	b, err := readExport(data)
	if err != nil {
		return nil, refused{fmt.Errorf("%s: %w", file, err)}
	}
	return b, nil
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

// sealedParts parses the bundle's sealed secrets, each of which must be addressed to the
// recipient key fingerprint to.
func sealedParts(b *exportBundle, to string) ([]*seal.Sealed, error) {
	var out []*seal.Sealed
	for _, name := range b.header.Secrets {
		s, err := seal.ParseSealed(b.parts["secrets/"+name+".sealed"])
		switch {
		case err != nil:
			return nil, fmt.Errorf("part secrets/%s.sealed: %w", name, err)
		case s.Name() != name:
			return nil, fmt.Errorf("part secrets/%s.sealed holds secret %q", name, s.Name())
		case s.To() != to:
			return nil, fmt.Errorf("secret %s is sealed to %s, the recipient key is %s", name, s.To(), to)
		}
		out = append(out, s)
	}
	return out, nil
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
		if signer, err = pbp.ParsePrivateKey(data); err != nil {
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

// restore writes the bundle's files into dir: the policy at its top, the audit logs and their
// verification under audit-archive/, the sealed secrets under sealed/, and the bundle manifest as
// export.json. It refuses to replace any file, before writing any.
func restore(dir string, b *exportBundle) error {
	files := map[string][]byte{}
	for p, data := range b.parts {
		switch {
		case strings.HasPrefix(p, "policy/"):
			files[strings.TrimPrefix(p, "policy/")] = data
		case strings.HasPrefix(p, "audit/"):
			files["audit-archive/"+strings.TrimPrefix(p, "audit/")] = data
		case strings.HasPrefix(p, "secrets/"):
			files["sealed/"+strings.TrimPrefix(p, "secrets/")] = data
		}
	}
	files["export.json"], _ = json.MarshalIndent(b.header, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		if _, err := root.Lstat(n); err == nil {
			return refused{fmt.Errorf("%s exists: refusing to overwrite it (import into an empty folder)", filepath.Join(dir, n))}
		}
	}
	for _, n := range names {
		if err := writeNewIn(root, n, files[n], 0o644); err != nil {
			return fmt.Errorf("restore into %s: %w", dir, err)
		}
	}
	return nil
}

// waitKMSBundle finds the running kms's bundle in project's logs, as `kms bundle --wait` does.
func (a *app) waitKMSBundle(ctx context.Context, project string, files []string, wait time.Duration) (*seal.Bundle, error) {
	if !projectName.MatchString(project) {
		return nil, fmt.Errorf("--project %q is not a compose project name", project)
	}
	deadline := time.Now().Add(wait)
	for {
		logs, err := composeLogs(ctx, project, files)
		var b *seal.Bundle
		if err == nil {
			b, err = lastBundle(logs)
		}
		if err == nil {
			return b, nil
		}
		if time.Now().After(deadline) {
			return nil, refused{fmt.Errorf("the kms of %s: %w", project, err)}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(exitPoll):
		}
	}
}
