package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/images/llm/messages"
	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/strictjson"
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

func (a *app) compileCmd() *cobra.Command {
	var out, runtime string
	var check bool
	c := &cobra.Command{
		Use:   "compile",
		Short: "Compile the manifest into OCI specs, seccomp profiles and a compose file",
		Long: "Writes <dir>/docker-compose.yml and <dir>/compiled/<component>/{config.json,seccomp.json}.\n" +
			"With --check, writes nothing and exits 1 naming each file that differs from what the manifest compiles to.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			switch runtime {
			case "sharness":
			case "none":
				runtime = ""
			default:
				return fmt.Errorf("--runtime %q: want \"sharness\" (the shim) or \"none\" (the engine's default runtime: the policy is then a Setting, not a Boundary)", runtime)
			}
			m, files, err := a.build(out, runtime)
			if err != nil {
				return err
			}
			if check {
				drift, err := artefact.Check(out, files, compile.Dir)
				if err != nil {
					return err
				}
				var text strings.Builder
				for _, d := range drift {
					fmt.Fprintf(&text, "drift: %s: %s\n", filepath.Join(out, d.Path), d.Reason)
				}
				if len(drift) == 0 {
					fmt.Fprintf(&text, "ok: %d files in %s match policy %s\n", len(files), out, m.Hash)
				}
				if err := a.print(map[string]any{"policy": m.Hash, "ok": len(drift) == 0, "drift": drift}, text.String()); err != nil {
					return err
				}
				if len(drift) > 0 {
					return refused{fmt.Errorf("%d compiled files drifted from the manifest: run sharness-ai compile -o %s", len(drift), out)}
				}
				return nil
			}
			if err := artefact.Write(out, files); err != nil {
				return err
			}
			return a.print(map[string]any{"policy": m.Hash, "files": files.Paths()},
				fmt.Sprintf("compiled policy %s: %d files in %s\n", m.Hash, len(files), out))
		},
	}
	c.Flags().StringVarP(&out, "out", "o", ".", "output folder")
	c.Flags().BoolVar(&check, "check", false, "compare instead of writing; exit 1 on drift")
	c.Flags().StringVar(&runtime, "runtime", "sharness", "the runtime every service asks for: \"sharness\" (the shim, which refuses a container wider than its compiled policy) or \"none\" (the engine's default)")
	return c
}

// build loads the manifest and compiles every artefact of the stack as they belong in out.
func (a *app) build(out, runtime string) (*pbp.Manifest, compile.Artefacts, error) {
	m, err := a.load()
	if err != nil {
		return nil, nil, err
	}
	files, err := stack.Build(m, a.manifest, out, runtime)
	if err != nil {
		return nil, nil, err
	}
	return m, files, nil
}

func (a *app) hashCmd() *cobra.Command {
	var layer, tools string
	c := &cobra.Command{
		Use:   "hash",
		Short: "Print the policy hash M of the manifest (or, with --layer, the hash a manifest records for a layer file; with --tools, the pin of a tool list)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if tools != "" {
				h, err := toolsPin(tools)
				if err != nil {
					return err
				}
				return a.print(map[string]string{"tools": tools, "sha256": h}, h+"\n")
			}
			if layer != "" {
				h, err := pbp.LayerHash(os.DirFS(filepath.Dir(layer)), filepath.Base(layer))
				if err != nil {
					return inDir(filepath.Dir(layer), err)
				}
				return a.print(map[string]string{"layer": layer, "sha256": h}, h+"\n")
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			return a.print(map[string]string{"policy": m.Hash}, m.Hash+"\n")
		},
	}
	c.Flags().StringVar(&layer, "layer", "", "hash this layer file instead")
	c.Flags().StringVar(&tools, "tools", "", "print the pin (for business.llm.tools) of the tool list in this JSON file: an array of tool definitions, or a Messages request with tools")
	return c
}

// toolsPin is the hash llm computes for the tool list in file (images/llm/messages.ToolsHash).
func toolsPin(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	if err := strictjson.Check(data, messages.MaxDepth); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	raw := json.RawMessage(data)
	var req struct {
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(data, &req) == nil && req.Tools != nil {
		raw = req.Tools
	}
	h, err := messages.ToolsHash(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return h, nil
}

func (a *app) verifyCmd() *cobra.Command {
	var want, keyFile, sigFile string
	c := &cobra.Command{
		Use:   "verify",
		Short: "Check the manifest against the schema, compose it, and refuse it unless its hash or signature is the one supplied",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if want == "" && keyFile == "" {
				return errors.New("verify needs --policy-hash M (or SHARNESS_AI_POLICY_HASH) or --key PUBLIC.pem: without one, nothing says which policy you trust")
			}
			if err := validateSchema(a.manifest); err != nil {
				return err
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			if want != "" {
				if err := keys.CheckHash(want); err != nil {
					return err
				}
				if m.Hash != want {
					return refused{fmt.Errorf("policy hash mismatch: the manifest is %s, the supplied hash is %s", m.Hash, want)}
				}
			}
			if keyFile != "" {
				if err := verifySig(m.Hash, keyFile, sigFile, a.manifest); err != nil {
					return err
				}
			}
			return a.print(map[string]any{"policy": m.Hash, "ok": true}, "ok: "+m.Hash+"\n")
		},
	}
	c.Flags().StringVar(&want, "policy-hash", os.Getenv("SHARNESS_AI_POLICY_HASH"), "the hash you trust (env SHARNESS_AI_POLICY_HASH)")
	c.Flags().StringVar(&keyFile, "key", "", "a pinned Ed25519 public key (PEM) whose signature you trust")
	c.Flags().StringVar(&sigFile, "sig", "", "the signature file (default: <manifest>.sig)")
	return c
}

func verifySig(hash, keyFile, sigFile, manifest string) error {
	if sigFile == "" {
		sigFile = manifest + ".sig"
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("read key %q: %w", keyFile, err)
	}
	pub, err := keys.ParsePublic(keyPEM)
	if err != nil {
		return fmt.Errorf("%s: %w", keyFile, err)
	}
	sig, err := os.ReadFile(sigFile)
	if err != nil {
		return refused{fmt.Errorf("no signature: read %q: %w", sigFile, err)}
	}
	if err := keys.Verify(hash, sig, pub); err != nil {
		return refused{fmt.Errorf("%s: %w", sigFile, err)}
	}
	return nil
}

func (a *app) signCmd() *cobra.Command {
	var keyFile, out string
	c := &cobra.Command{
		Use:   "sign",
		Short: "Sign the manifest's hash with an Ed25519 private key; writes <manifest>.sig",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			keyPEM, err := os.ReadFile(keyFile)
			if err != nil {
				return fmt.Errorf("read key %q: %w", keyFile, err)
			}
			priv, err := keys.ParsePrivate(keyPEM)
			if err != nil {
				return fmt.Errorf("%s: %w", keyFile, err)
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			sig, err := keys.Sign(m.Hash, priv)
			if err != nil {
				return err
			}
			if out == "" {
				out = a.manifest + ".sig"
			}
			if err := artefact.Write(filepath.Dir(out), map[string][]byte{filepath.Base(out): sig}); err != nil {
				return err
			}
			return a.print(map[string]string{"policy": m.Hash, "signature": out}, fmt.Sprintf("signed %s: %s\n", m.Hash, out))
		},
	}
	c.Flags().StringVar(&keyFile, "key", "", "the Ed25519 private key (PEM, PKCS #8)")
	c.Flags().StringVarP(&out, "out", "o", "", "where to write the signature (default: <manifest>.sig)")
	_ = c.MarkFlagRequired("key")
	return c
}

func (a *app) keygenCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "keygen",
		Short: "Make an Ed25519 signing key pair: <dir>/signing.key (0600) and <dir>/signing.pub",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			privFile, pubFile := filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub")
			for _, f := range []string{privFile, pubFile} {
				if _, err := os.Lstat(f); err == nil {
					return fmt.Errorf("%s exists: refusing to overwrite a key", f)
				}
			}
			_, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			privPEM, pubPEM, err := keys.Encode(priv)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(privFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := f.Write(privPEM); err != nil {
				f.Close()
				os.Remove(privFile)
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := os.WriteFile(pubFile, pubPEM, 0o644); err != nil {
				return err
			}
			id, pin := keys.ID(priv.Public().(ed25519.PublicKey)), keys.Pin(priv.Public().(ed25519.PublicKey))
			return a.print(map[string]string{"private": privFile, "public": pubFile, "key": id, "pin": pin},
				fmt.Sprintf("wrote %s and %s (key %s)\npin it for the stack: SHARNESS_AI_POLICY_KEY=%s\n", privFile, pubFile, id, pin))
		},
	}
	c.Flags().StringVar(&dir, "dir", ".", "folder for the key pair")
	return c
}

func (a *app) lockCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lock",
		Short: "Record each layer file's current hash in the manifest (after editing a layer); prints the new M",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			data, err := os.ReadFile(a.manifest)
			if err != nil {
				return fmt.Errorf("read manifest %q: %w", a.manifest, err)
			}
			dir, name := filepath.Split(filepath.Clean(a.manifest))
			if dir == "" {
				dir = "."
			}
			locked, err := pbp.Lock(os.DirFS(dir), name, data)
			if err != nil {
				return inDir(dir, err)
			}
			m, err := pbp.LoadBytes(os.DirFS(dir), name, locked)
			if err != nil {
				return inDir(dir, err)
			}
			if err := artefact.Write(dir, map[string][]byte{name: locked}); err != nil {
				return err
			}
			return a.print(map[string]string{"policy": m.Hash}, fmt.Sprintf("locked %s: policy %s\n", a.manifest, m.Hash))
		},
	}
}
