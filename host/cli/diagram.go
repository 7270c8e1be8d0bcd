package cli

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/policies/diagram"
)

// DiagramFile is the picture of the default stack the README shows, relative to the repository
// root (issue 18).
const DiagramFile = "docs/stack.svg"

func (a *app) diagramCmd() *cobra.Command {
	var out string
	var check bool
	c := &cobra.Command{
		Use:   "diagram",
		Short: "Draw the manifest's components and edges as an SVG picture (the README's " + DiagramFile + ")",
		Long: "Writes an SVG with one box per component, one arrow per edge network and the egress network to the Internet;\n" +
			"the same policy always draws the same bytes. -o - writes it to standard output.\n" +
			"With --check, writes nothing and exits 1 if the file differs from what the manifest draws.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			m, err := a.load()
			if err != nil {
				return err
			}
			svg, err := diagram.SVG(m)
			if err != nil {
				return err
			}
			if out == "-" {
				if check {
					return fmt.Errorf("--check compares with a file: give it with -o")
				}
				_, err := a.out.Write(svg)
				return err
			}
			dir, name := filepath.Split(filepath.Clean(out))
			files := map[string][]byte{name: svg}
			if check {
				drift, err := artefact.Check(dir, files)
				if err != nil {
					return err
				}
				text := fmt.Sprintf("ok: %s matches policy %s\n", out, m.Hash)
				if len(drift) > 0 { // one file: at most one drift
					text = fmt.Sprintf("drift: %s: %s\n", out, drift[0].Reason)
				}
				if err := a.print(map[string]any{"policy": m.Hash, "file": out, "ok": len(drift) == 0, "drift": drift}, text); err != nil {
					return err
				}
				if len(drift) > 0 {
					return refused{fmt.Errorf("%s is not what the manifest draws: run sharness-ai diagram -o %s", out, out)}
				}
				return nil
			}
			if err := artefact.Write(dir, files); err != nil {
				return err
			}
			return a.print(map[string]any{"policy": m.Hash, "file": out, "components": len(m.Components), "edges": len(m.Edges)},
				fmt.Sprintf("drew policy %s: %d components, %d edges in %s\n", m.Hash, len(m.Components), len(m.Edges), out))
		},
	}
	c.Flags().StringVarP(&out, "out", "o", DiagramFile, "the SVG file to write, or - for standard output")
	c.Flags().BoolVar(&check, "check", false, "compare instead of writing; exit 1 if the file differs")
	return c
}
