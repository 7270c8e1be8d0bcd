package compose

import (
	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// File is the compose file's name in the output folder.
const File = "docker-compose.yml"

// Build compiles m into every artefact of a stack: each component's OCI spec and seccomp
// profile under compiled/, and the compose file that runs them, which refers to the profiles
// relative to itself.
func Build(m *pbp.Manifest, opt Options) (compile.Artefacts, error) {
	out, err := compile.Compile(m)
	if err != nil {
		return nil, err
	}
	if opt.SeccompDir == "" {
		opt.SeccompDir = "./" + compile.Dir
	}
	if opt.Project == "" {
		opt.Project = "sharness"
	}
	if out[File], err = Render(m, opt); err != nil {
		return nil, err
	}
	return out, nil
}
