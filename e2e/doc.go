// Package e2e drives SHarness stacks on a real Docker engine. Its tests carry the e2e build tag
// and need the engine up, the compose plugin installed and the images built: hack/e2e.sh does
// all three, then runs `go test -tags e2e ./e2e/...`. They fail, never skip, when any is missing.
//
// They check what the containers report of their own confinement; they do not test the engine
// itself, nor side doors the agent does not probe.
package e2e
