package cli

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/sharness-ai/sharness/host/shim"
	"github.com/sharness-ai/sharness/host/stack"
)

func (a *app) installCmd() *cobra.Command {
	var root string
	var replace bool
	c := &cobra.Command{
		Use:   "install",
		Short: "Install the manifest's compiled policies where sharness-runtime reads them: <root>/<hash>/<component>/{config.json,seccomp.json}",
		Long: "Compiles the manifest and writes every component's config.json and seccomp.json into\n" +
			"<root>/<the policy hash's 64 hex digits>/<component>/, files 0644 in folders 0755, owned by\n" +
			"root when run as root. The folder appears whole or not at all (written beside, then renamed).\n" +
			"An identical installed policy is left as it is; a different one under the same hash (compiled by\n" +
			"another version of sharness-ai) is an error, unless --replace swaps it for this one atomically.\n" +
			"A test world's policy (one with test_world, e.g. policies/world/manifest.yaml) also writes\n" +
			"<root>/<hex>/fixtures.json, the containers beside the stack the shim admits as its fixtures.\n" +
			"Every install also records, in <root>/<hex>/code.json, each component's image id and the SHA-256 of\n" +
			"its entrypoint as the engine's image holds it (read through a container created and removed, never\n" +
			"started): sharness-runtime refuses a component's container that runs other code, and a container\n" +
			"claiming no component that is one. Build the images first (hack/build-images.sh); run install again\n" +
			"after rebuilding them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := a.load()
			if err != nil {
				return err
			}
			dir, already, err := stack.Install(m, root, replace)
			if err != nil {
				return err
			}
			code, err := stack.RecordCode(cmd.Context(), m, dir, a.docker.ImageFile)
			if err != nil {
				return fmt.Errorf("%w; the policy is installed in %s, but sharness-runtime refuses every component until its code is recorded", err, dir)
			}
			names := make([]string, 0, len(m.Components))
			for _, c := range m.Components {
				names = append(names, c.Name)
			}
			slices.Sort(names)
			var fixtures []string
			if m.TestWorld != nil {
				for name := range m.TestWorld.Fixtures {
					fixtures = append(fixtures, name)
				}
				slices.Sort(fixtures)
			}
			text := fmt.Sprintf("installed policy %s: %d components in %s\n", m.Hash, len(names), dir)
			if already {
				text = fmt.Sprintf("policy %s is already installed in %s: left as it is\n", m.Hash, dir)
			}
			for _, name := range names {
				c := code.Components[name]
				text += fmt.Sprintf("  %-8s code %s (%s in image %s)\n", name, c.SHA256[:19]+"…", c.Path, c.Image[:19]+"…")
			}
			if m.TestWorld != nil {
				text += fmt.Sprintf("note: policy %s is a test world (%s): fixtures %v\n", m.Hash, m.TestWorld.Reason, fixtures)
			}
			if os.Geteuid() != 0 {
				text += fmt.Sprintf("note: not run as root, so the files belong to uid %d; only a root-owned folder keeps containers and users from rewriting the policy\n", os.Geteuid())
			}
			return a.print(map[string]any{"policy": m.Hash, "dir": dir, "components": names, "fixtures": fixtures, "already": already, "code": code.Components}, text)
		},
	}
	c.Flags().StringVar(&root, "root", shim.DefaultRoot, "the policies folder sharness-runtime reads")
	c.Flags().BoolVar(&replace, "replace", false, "replace a different policy installed under the same hash (the manifest is the same; the compiler is not)")
	return c
}
