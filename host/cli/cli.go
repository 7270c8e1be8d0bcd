// Package cli is the sharness-ai command line: the host-side verbs that compile, hash, sign and
// verify policies. It reads and writes files; the decisions themselves live in policies/.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// Exit codes, as the README documents them.
const (
	ExitOK      = 0
	ExitRefused = 1 // a check failed: drift, a hash or signature mismatch
	ExitUsage   = 2 // bad input: an unreadable or invalid manifest, a bad flag
)

// DefaultManifest is the stack's manifest, relative to the repository root.
const DefaultManifest = "policies/default/manifest.yaml"

// refused marks an error as a failed check rather than bad input.
type refused struct{ error }

func (r refused) Unwrap() error { return r.error }

type app struct {
	out, errOut io.Writer
	manifest    string
	asJSON      bool
}

// Main runs the CLI with args (without the program name) and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	a := &app{out: stdout, errOut: stderr}
	root := &cobra.Command{
		Use:           "sharness-ai",
		Short:         "Compile, hash, sign and verify SHarness policies",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&a.manifest, "file", "f", envOr("SHARNESS_AI_MANIFEST", DefaultManifest), "the manifest (env SHARNESS_AI_MANIFEST)")
	root.PersistentFlags().BoolVar(&a.asJSON, "json", false, "print machine-readable JSON")
	root.AddCommand(a.compileCmd(), a.hashCmd(), a.verifyCmd(), a.signCmd(), a.keygenCmd(), a.explainCmd(), a.lockCmd(), a.secretCmd(), a.kmsCmd(), a.doctorCmd(), a.workspaceCmd(), a.installCmd(), a.operatorCmd(), a.pendingCmd(), a.approveCmd(), a.denyCmd(), a.dashboardCmd(), a.auditCmd(), a.recipientCmd(), a.exportCmd(), a.importCmd(), a.upCmd(), a.statusCmd(), a.downCmd())
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "sharness-ai:", err)
	if errors.As(err, new(refused)) {
		return ExitRefused
	}
	return ExitUsage
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// load reads and composes the manifest named by -f.
func (a *app) load() (*pbp.Manifest, error) {
	dir, name := filepath.Split(filepath.Clean(a.manifest))
	if dir == "" {
		dir = "."
	}
	m, err := pbp.Load(os.DirFS(dir), name)
	if err != nil {
		return nil, inDir(dir, err)
	}
	return m, checkComponents(m)
}

// inDir makes a policy error name its file as the user would, relative to the working directory.
func inDir(dir string, err error) error {
	var pe *pbp.Error
	if errors.As(err, &pe) && dir != "." && dir != "" {
		pe.File = filepath.Join(dir, pe.File)
	}
	return err
}

// print writes v as JSON with --json, or text otherwise.
func (a *app) print(v any, text string) error {
	if a.asJSON {
		enc := json.NewEncoder(a.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprint(a.out, text)
	return err
}
