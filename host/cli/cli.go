// Package cli is the sharness-ai command line: the cobra verbs. Each reads its flags and
// environment, calls the library that does the work, prints what it returns (text, or JSON with
// --json) and maps the outcome to an exit code. The policy's decisions live in policies/; what is
// done to the stack on the host lives in host/stack (compile, install, up, status, down),
// host/record (the audit verbs), host/exit and host/bundle (export and import) and host/doctor,
// all of which reach the engine through host/engine.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/engine"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Exit codes, as docs/cli.md documents them (verb by verb, under "Exit codes").
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

// Refused says the error is a failed check. The libraries mark theirs the same way.
func (refused) Refused() bool { return true }

type app struct {
	out, errOut io.Writer
	manifest    string
	asJSON      bool
	docker      *engine.Docker
}

// Main runs the CLI with args (without the program name) and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return execute(args, stdout, stderr, engine.New())
}

// execute is Main on the engine d.
func execute(args []string, stdout, stderr io.Writer, d *engine.Docker) int {
	a := &app{out: stdout, errOut: stderr, docker: d}
	root := &cobra.Command{
		Use:           "sharness-ai",
		Short:         "Compile, hash, sign and verify SHarness policies",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&a.manifest, "file", "f", envOr("SHARNESS_AI_MANIFEST", DefaultManifest), "the manifest (env SHARNESS_AI_MANIFEST)")
	root.PersistentFlags().BoolVar(&a.asJSON, "json", false, "print machine-readable JSON")
	root.AddCommand(a.compileCmd(), a.hashCmd(), a.diagramCmd(), a.verifyCmd(), a.signCmd(), a.keygenCmd(), a.explainCmd(), a.lockCmd(), a.secretCmd(), a.kmsCmd(), a.doctorCmd(), a.workspaceCmd(), a.installCmd(), a.operatorCmd(), a.pendingCmd(), a.approveCmd(), a.denyCmd(), a.dashboardCmd(), a.auditCmd(), a.recipientCmd(), a.exportCmd(), a.importCmd(), a.upCmd(), a.statusCmd(), a.downCmd(), a.sessionCmd(), a.runCmd())
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	if es := (exitStatus{}); errors.As(err, &es) {
		fmt.Fprintf(stderr, "sharness-ai: %v\n", err)
		return es.code
	}
	fmt.Fprintln(stderr, "sharness-ai:", err)
	if r := (interface{ Refused() bool })(nil); errors.As(err, &r) && r.Refused() {
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
	return m, stack.CheckComponents(m)
}

// stack is the compose project name of the stack on a.docker, with its compose files (none:
// compose's own choice) and the manifest it runs.
func (a *app) stack(name string, files []string, m *pbp.Manifest) stack.Project {
	return stack.Project{Engine: a.docker, Name: name, Files: files, Policy: m, Progress: a.errOut}
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
