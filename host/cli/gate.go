package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/internal/gate"
)

// defaultOperatorKey is where the operator key lives unless --key says otherwise:
// SHARNESS_AI_OPERATOR_KEY, else $XDG_CONFIG_HOME/sharness-ai/operator.key (~/.config/...).
func defaultOperatorKey() string {
	if v := os.Getenv("SHARNESS_AI_OPERATOR_KEY"); v != "" {
		return v
	}
	if dir, err := os.UserConfigDir(); err == nil {
		return filepath.Join(dir, "sharness-ai", "operator.key")
	}
	return ""
}

// gateDirs are the gate directories to look in: --gate-dir flags, else SHARNESS_AI_GATE_DIRS
// (colon-separated), else, with --project, the mountpoints of the project's volumes
// <project>_gate-<component> (root's on the host).
func (a *app) gateDirs(ctx context.Context, flags []string, project string) ([]string, error) {
	dirs := flags
	if len(dirs) == 0 {
		dirs = strings.FieldsFunc(os.Getenv("SHARNESS_AI_GATE_DIRS"), func(r rune) bool { return r == ':' })
	}
	if len(dirs) > 0 || project == "" {
		if len(dirs) == 0 {
			return nil, errors.New("no gate directory: pass --project or --gate-dir (or set SHARNESS_AI_GATE_DIRS)")
		}
		return dirs, nil
	}
	vols, err := a.stack(project, nil, nil).Volumes(ctx, "gate")
	for _, v := range vols {
		dirs = append(dirs, v.Dir)
	}
	return dirs, err
}

func gateDirFlag(c *cobra.Command, dirs *[]string, project *string) {
	c.Flags().StringArrayVar(dirs, "gate-dir", nil, "a component's gate directory, repeatable (env SHARNESS_AI_GATE_DIRS, colon-separated)")
	if project != nil {
		c.Flags().StringVarP(project, "project", "p", "", "the compose project: look in its volumes <project>_gate-<component> (as root), when no --gate-dir is given")
	}
}

func keyFlag(c *cobra.Command, key *string, what string) {
	c.Flags().StringVar(key, "key", defaultOperatorKey(), what+" (env SHARNESS_AI_OPERATOR_KEY; default $XDG_CONFIG_HOME/sharness-ai/operator.key)")
}

func (a *app) operatorCmd() *cobra.Command {
	c := &cobra.Command{Use: "operator", Short: "Manage the operator key that signs approvals on this host"}
	var key string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Make the operator's Ed25519 key (mode 0600, never overwritten) and print the public key for the components",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if key == "" {
				return errors.New("no operator key path: pass --key")
			}
			pub, err := gate.GenerateOperatorKey(key)
			if errors.Is(err, fs.ErrExist) {
				return refused{err}
			} else if err != nil {
				return err
			}
			pin := gate.FormatPublicKey(pub)
			return a.print(map[string]string{"key": key, "public": pin},
				fmt.Sprintf("wrote %s (mode 0600)\noperator public key: %s\n", key, pin))
		},
	}
	keyFlag(initCmd, &key, "where to write the key")
	c.AddCommand(initCmd)
	return c
}

// pendingRow is one request as `pending --json` prints it.
type pendingRow struct {
	Dir string `json:"dir"`
	gate.Request
}

func (a *app) pendingCmd() *cobra.Command {
	var dirs []string
	var project string
	c := &cobra.Command{
		Use:   "pending",
		Short: "List the requests waiting for a person (exit 1 if a gate directory or request could not be read)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ds, err := a.gateDirs(cmd.Context(), dirs, project)
			if err != nil {
				return err
			}
			byProject := len(dirs) == 0 && os.Getenv("SHARNESS_AI_GATE_DIRS") == ""
			rows := []pendingRow{}
			var errs []error
			for _, d := range ds {
				reqs, err := gate.List(d)
				if byProject && errors.Is(err, gate.ErrNotOpened) {
					continue // a volume of a component this project has not started
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", d, err))
				}
				for _, r := range reqs {
					rows = append(rows, pendingRow{d, r})
				}
			}
			var b strings.Builder
			if len(rows) == 0 {
				b.WriteString("no pending requests\n")
			} else {
				tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tCOMPONENT\tACTION\tTIER\tEXPIRES IN\tSUMMARY")
				for _, r := range rows {
					left := time.Until(r.Expires).Truncate(time.Second)
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Component, r.Action, r.Tier, left, r.Summary)
				}
				tw.Flush()
			}
			if err := a.print(rows, b.String()); err != nil {
				return err
			}
			if len(errs) > 0 {
				return refused{errors.Join(errs...)}
			}
			return nil
		},
	}
	gateDirFlag(c, &dirs, &project)
	return c
}

func (a *app) approveCmd() *cobra.Command { return a.decideCmd(gate.Approve) }
func (a *app) denyCmd() *cobra.Command    { return a.decideCmd(gate.Deny) }

func (a *app) decideCmd(d gate.Decision) *cobra.Command {
	var dirs []string
	var key, project string
	var session bool
	ttl := gate.DefaultTTL
	c := &cobra.Command{
		Use:   string(d) + " ID",
		Short: "Sign a decision to " + string(d) + " the pending request ID (see `sharness-ai pending`)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := a.gateDirs(cmd.Context(), dirs, project)
			switch {
			case err != nil:
				return err
			case ttl <= 0 || ttl > gate.MaxTTL:
				return fmt.Errorf("--ttl %s: want a positive duration of at most %s", ttl, gate.MaxTTL)
			case key == "":
				return errors.New("no operator key: pass --key")
			}
			priv, err := gate.ReadOperatorKey(key)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%w (make one with `sharness-ai operator init`)", err)
			} else if err != nil {
				return refused{err}
			}
			scope := gate.ScopeOnce
			if session {
				scope = gate.ScopeSession
			}
			for _, dir := range ds {
				r, err := gate.Decide(dir, args[0], d, priv, scope, ttl)
				if errors.Is(err, gate.ErrUnknown) || errors.Is(err, fs.ErrNotExist) {
					continue // another component's directory, or one whose volume is gone
				} else if err != nil {
					return refused{err}
				}
				past := map[gate.Decision]string{gate.Approve: "approved", gate.Deny: "denied"}[d]
				text := fmt.Sprintf("%s %s: %s %s %q\n", past, r.ID, r.Component, r.Action, r.Summary)
				if d == gate.Approve {
					text = fmt.Sprintf("%s %s: %s %s %q (%s, usable for %s)\n", past, r.ID, r.Component, r.Action, r.Summary, scope, ttl)
				}
				return a.print(map[string]any{"dir": dir, "decision": d, "scope": scope, "ttl": ttl.String(), "request": r}, text)
			}
			return refused{fmt.Errorf("%w %q in %s (decided, timed out, or never made)", gate.ErrUnknown, args[0], strings.Join(ds, ", "))}
		},
	}
	gateDirFlag(c, &dirs, &project)
	keyFlag(c, &key, "the operator key")
	if d == gate.Approve {
		c.Flags().BoolVar(&session, "session", false, "also approve identical requests (same action and digest) until the approval expires; refused for tier every")
		c.Flags().DurationVar(&ttl, "ttl", gate.DefaultTTL, fmt.Sprintf("how long the approval stays usable (at most %s)", gate.MaxTTL))
	}
	return c
}
