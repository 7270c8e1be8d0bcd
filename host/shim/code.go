package shim

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
)

// CheckCode holds a container to its policy's subject.code_sha256, when the policy pins one: the
// container must run the policy's entrypoint, and that file in the container's root file system
// must hash to the pin. hash reads a path inside the root ("sha256:<hex>"); an error reading it is
// a refusal. Without a pin there is nothing to compare (the default stack pins none: its images
// are built on the machine that runs them).
func CheckCode(want, got *specs.Spec, hash func(path string) (string, error)) []Reason {
	pin, ok := want.Annotations[compile.AnnotationCodeSHA256]
	if !ok {
		return nil
	}
	if want.Process == nil || len(want.Process.Args) == 0 {
		return []Reason{{Field: "process.args", Want: "the policy's entrypoint", Got: "none in the compiled policy"}}
	}
	entry := want.Process.Args[0]
	var args []string
	if got.Process != nil {
		args = afterInit(got.Process.Args) // under `init: true`, Docker's init runs the entrypoint
	}
	if len(args) == 0 || args[0] != entry {
		var first string
		if len(args) > 0 {
			first = args[0]
		}
		return []Reason{{Field: "process.args[0]", Want: entry + " (subject.code_sha256 pins it)", Got: first}}
	}
	sum, err := hash(entry)
	if err != nil {
		return []Reason{{Field: "subject.code_sha256", Want: pin, Got: err.Error()}}
	}
	if sum != pin {
		return []Reason{{Field: "subject.code_sha256", Want: pin + " for " + entry, Got: sum}}
	}
	return nil
}
