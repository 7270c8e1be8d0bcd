package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/host/stack"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// policiesRoot is where sharness-runtime reads the compiled policies, and so the session records
// beside them: $SHARNESS_RUNTIME_POLICIES, as the shim reads it, or its default.
func policiesRoot() string { return envOr(shim.EnvPolicies, shim.DefaultRoot) }

// recordSession writes the session record of project (shim.Session): the policy m, the manifest's
// folder, and the workspace, secrets, operator key and gate timeout as the environment names them
// (the compose file's defaults, relative to dir, where it names none). up passes the recorded
// values to compose, so that the stack interpolates exactly what the runtime shim will hold it to.
func (a *app) recordSession(project string, m *pbp.Manifest, dir string) (shim.Session, error) {
	in := stack.SessionInputsFromEnv(stack.SessionInputs{Project: project, Policy: m.Hash, Manifest: a.manifest, Base: dir}, os.Getenv)
	s, err := stack.NewSession(in)
	if err != nil {
		return s, err
	}
	path, err := stack.RecordSession(stack.SessionsDir(policiesRoot()), s)
	if err != nil {
		return s, err
	}
	fmt.Fprintf(a.errOut, "session %s recorded in %s: workspace %s, manifest %s, secrets %s\n", s.Project, path, s.Workspace, s.Manifest, orDash(s.Secrets))
	return s, nil
}

func (a *app) sessionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "session",
		Short: "The root-owned record sharness-runtime holds a stack's components to",
	}
	var project, dir string
	record := &cobra.Command{
		Use:   "record",
		Short: "Record a session before starting the stack with docker compose yourself (sharness-ai up records its own)",
		Long: "Writes <policies root>/../sessions/<project>.json (root's, 0644): the manifest's policy and folder,\n" +
			"and the workspace (SHARNESS_AI_WORKSPACE, else <dir>/workspace), kms's secrets folder\n" +
			"(SHARNESS_AI_SECRETS_DIR, else <dir>/secrets), the operator's key (SHARNESS_AI_OPERATOR_PUBKEY)\n" +
			"and the gate's timeout (SHARNESS_AI_GATE_TIMEOUT), each folder absolute and without symbolic links.\n" +
			"sharness-runtime refuses a component of the project that binds another folder, names another\n" +
			"policy or is given another key or timeout, and every component of a project without a record.\n" +
			"Run it as root, with the environment docker compose will see.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkProject(project); err != nil {
				return err
			}
			m, err := a.load()
			if err != nil {
				return err
			}
			s, err := a.recordSession(project, m, dir)
			if err != nil {
				return err
			}
			return a.print(s, fmt.Sprintf("policy %s, workspace %s\n", s.Policy, s.Workspace))
		},
	}
	record.Flags().StringVarP(&project, "project", "p", "sharness", "the compose project")
	record.Flags().StringVar(&dir, "dir", ".", "the compose file's folder, which the default folders are relative to")
	c.AddCommand(record)
	return c
}
