package cli

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// secretInput is where `secret seal` reads the secret: stdin, never argv (argv is visible to
// every process of the host and lands in shell history). Tests replace it.
var secretInput io.Reader = os.Stdin

func defaultSecretsDir() string { return envOr("SHARNESS_AI_SECRETS_DIR", "secrets") }

func (a *app) secretCmd() *cobra.Command {
	c := &cobra.Command{Use: "secret", Short: "Seal secrets to a kms identity and list sealed secrets (never their values)"}
	c.AddCommand(a.secretSealCmd(), a.secretListCmd())
	return c
}

func (a *app) secretSealCmd() *cobra.Command {
	var to, keyFile, dir string
	var expires time.Duration
	c := &cobra.Command{
		Use:   "seal NAME < secret",
		Short: "Seal the secret read from stdin to a kms bundle, into <out>/NAME.sealed",
		Long: "Reads the secret from stdin to EOF (one trailing newline is dropped; 1 to 8192 bytes), seals it\n" +
			"with HPKE to the kms identity of --to (from `sharness-ai kms bundle`), and writes <out>/NAME.sealed\n" +
			"atomically. With --key (from `sharness-ai keygen`) the file is signed. The value is never printed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !pbp.SecretName(name) {
				return fmt.Errorf("%q is not a secret name: lower-case letters, digits, '.', '_' and '-', at most 64", name)
			}
			if expires <= 0 {
				return fmt.Errorf("--expires %s: want a positive duration (e.g. 24h)", expires)
			}
			b, err := readBundle(to)
			if err != nil {
				return err
			}
			var signer ed25519.PrivateKey
			if keyFile != "" {
				data, err := os.ReadFile(keyFile)
				if err != nil {
					return fmt.Errorf("read key: %w", err)
				}
				if signer, err = keys.ParsePrivate(data); err != nil {
					return fmt.Errorf("%s: %w", keyFile, err)
				}
			}
			if f, ok := secretInput.(*os.File); ok {
				if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
					fmt.Fprintln(a.errOut, "reading the secret from the terminal until EOF (Ctrl-D); it will echo: prefer a pipe")
				}
			}
			secret, err := readSecret(secretInput)
			if err != nil {
				return err
			}
			s, err := seal.Seal(b.Key(), name, secret, time.Now().Add(expires), signer)
			clear(secret)
			if err != nil {
				return err
			}
			if err := artefact.Write(dir, map[string][]byte{name + ".sealed": s.Marshal()}); err != nil {
				return err
			}
			warnHygiene(a.errOut, b)
			file := filepath.Join(dir, name+".sealed")
			exp := s.Expires().Format(time.RFC3339)
			return a.print(map[string]string{"name": name, "to": s.To(), "expires": exp, "file": file, "sender": senderOf(s)},
				fmt.Sprintf("sealed %s to kms %s (policy %s), expires %s, %s: %s\n", name, s.To(), b.PolicyHash(), exp, senderOf(s), file))
		},
	}
	c.Flags().StringVar(&to, "to", "", "the kms bundle file to seal to (from `sharness-ai kms bundle --out`)")
	c.Flags().DurationVar(&expires, "expires", 24*time.Hour, "how long kms may open the secret")
	c.Flags().StringVar(&keyFile, "key", "", "sign with this Ed25519 private key (PEM, from `sharness-ai keygen`)")
	c.Flags().StringVar(&dir, "out", defaultSecretsDir(), "folder of sealed secrets, mounted read-only into kms (env SHARNESS_AI_SECRETS_DIR)")
	_ = c.MarkFlagRequired("to")
	return c
}

// readSecret reads r to EOF, drops one trailing newline, and refuses empty and oversize secrets.
func readSecret(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, seal.MaxSecret+3))
	if err != nil {
		return nil, fmt.Errorf("read the secret from stdin: %w", err)
	}
	if s, ok := bytes.CutSuffix(data, []byte("\n")); ok {
		data, _ = bytes.CutSuffix(s, []byte("\r"))
	}
	switch {
	case len(data) == 0:
		return nil, errors.New("the secret on stdin is empty")
	case len(data) > seal.MaxSecret:
		clear(data)
		return nil, fmt.Errorf("the secret on stdin has more than %d bytes", seal.MaxSecret)
	}
	return data, nil
}

func readBundle(path string) (*seal.Bundle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, seal.MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	b, err := seal.ParseBundle(bytes.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// warnHygiene says which memory-hygiene measures the kms of b runs without.
func warnHygiene(w io.Writer, b *seal.Bundle) {
	h := b.Hygiene()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if h[k] != "ok" {
			fmt.Fprintf(w, "warning: kms %s runs with %s %s\n", b.Fingerprint(), k, h[k])
		}
	}
}

func senderOf(s *seal.Sealed) string {
	if s.Sender() == nil {
		return "unsigned"
	}
	return "signed by " + keys.Pin(s.Sender())
}

// listed is one row of `secret list`.
type listed struct {
	File    string `json:"file"`
	Name    string `json:"name,omitempty"`
	To      string `json:"to,omitempty"`
	Expires string `json:"expires,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	Sender  string `json:"sender,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (a *app) secretListCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the sealed secrets of a folder: name, recipient kms, expiry, sender; never values (exit 1 if a file is invalid)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			files, err := filepath.Glob(filepath.Join(dir, "*.sealed"))
			if err != nil {
				return err
			}
			rows, bad := []listed{}, 0
			now := time.Now()
			for _, f := range files {
				r := listed{File: f}
				s, err := readSealed(f)
				if err != nil {
					r.Error, bad = err.Error(), bad+1
				} else {
					r.Name, r.To, r.Expires, r.Expired, r.Sender = s.Name(), s.To(), s.Expires().Format(time.RFC3339), !now.Before(s.Expires()), senderOf(s)
				}
				rows = append(rows, r)
			}
			var b strings.Builder
			tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTO\tEXPIRES\tSENDER")
			for _, r := range rows {
				switch {
				case r.Error != "":
					fmt.Fprintf(tw, "%s\tinvalid: %s\n", r.File, r.Error)
				case r.Expired:
					fmt.Fprintf(tw, "%s\t%s\t%s (expired)\t%s\n", r.Name, r.To, r.Expires, r.Sender)
				default:
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.To, r.Expires, r.Sender)
				}
			}
			tw.Flush()
			if err := a.print(rows, b.String()); err != nil {
				return err
			}
			if bad > 0 {
				return refused{fmt.Errorf("%d of %d sealed files in %s are invalid", bad, len(rows), dir)}
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultSecretsDir(), "folder of sealed secrets (env SHARNESS_AI_SECRETS_DIR)")
	return c
}

func readSealed(path string) (*seal.Sealed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, seal.MaxFile+1))
	if err != nil {
		return nil, err
	}
	s, err := seal.ParseSealed(data)
	if err != nil {
		return nil, err
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".sealed"); s.Name() != want {
		return nil, fmt.Errorf("the file holds secret %q, kms looks for it as %s.sealed", s.Name(), s.Name())
	}
	return s, nil
}

func (a *app) kmsCmd() *cobra.Command {
	c := &cobra.Command{Use: "kms", Short: "Talk to the running stack's kms"}
	var project, out string
	var files []string
	var wait time.Duration
	bundle := &cobra.Command{
		Use:   "bundle",
		Short: "Print (or write) the running kms's public bundle, from `docker compose logs kms` (exit 1 if there is none)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// kms prints its bundle once it has made its identity, a moment after it starts.
			b, err := a.stack(project, files, nil).KMSBundle(cmd.Context(), wait)
			if err != nil {
				return err
			}
			// Seal only to a kms that runs the policy the person supplied.
			if want := os.Getenv("SHARNESS_AI_POLICY_HASH"); want != "" && b.PolicyHash() != want {
				return refused{fmt.Errorf("the running kms serves policy %s, not the supplied SHARNESS_AI_POLICY_HASH %s: refusing to hand out its bundle", b.PolicyHash(), want)}
			}
			warnHygiene(a.errOut, b)
			if out == "" {
				_, err := fmt.Fprintf(a.out, "%s\n", b.Marshal())
				return err
			}
			if err := artefact.Write(filepath.Dir(out), map[string][]byte{filepath.Base(out): append(b.Marshal(), '\n')}); err != nil {
				return err
			}
			return a.print(map[string]any{"file": out, "fingerprint": b.Fingerprint(), "policy": b.PolicyHash(), "created": b.Created().Format(time.RFC3339), "hygiene": b.Hygiene()},
				fmt.Sprintf("wrote %s: kms %s, policy %s, created %s\n", out, b.Fingerprint(), b.PolicyHash(), b.Created().Format(time.RFC3339)))
		},
	}
	bundle.Flags().StringVarP(&project, "project", "p", os.Getenv("COMPOSE_PROJECT_NAME"), "compose project name (env COMPOSE_PROJECT_NAME)")
	bundle.Flags().StringSliceVarP(&files, "file", "f", nil, "compose file, repeatable (default: docker compose's own choice)")
	bundle.Flags().DurationVar(&wait, "wait", 0, "keep looking this long for a bundle (kms prints it a moment after it starts)")
	bundle.Flags().StringVarP(&out, "out", "o", "", "write the bundle to this file instead of stdout")
	c.AddCommand(bundle)
	return c
}
