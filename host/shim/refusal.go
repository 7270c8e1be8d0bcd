package shim

import (
	"strings"

	"github.com/sharness-ai/sharness/host/shim/runc"
)

// Refusal is the shim's decision not to hand a command over to runc, and the error Run returns:
// who was refused, and why. Its reasons are every way the command is wider than the container's
// compiled policy, or the one reason it could not be checked (fail closed); the first is also
// logged under its own keys. Container, Component and Policy are "" while unknown.
type Refusal struct {
	Container, Component, Policy string
	Reasons                      []Reason
	// Cut: the running container is already wider than its policy (a network connected after it
	// started), so the shim kills it as well as refusing the command.
	Cut bool
}

// Reason is one way a spec is wider than its policy, or one thing the shim could not read. Field
// names the OCI field with a JSON path (root.readonly, mounts[/var/run/docker.sock],
// linux.namespaces.network) or what was missing (argv, config.json, marker); Want says what the
// policy allows and Got what the command asks for.
type Reason struct {
	Field, Want, Got string
}

// Error is the refusal as docker shows it: "sharness-runtime: refused WHO: FIELD: want WANT got
// GOT; ...".
func (r *Refusal) Error() string {
	who := r.Component
	if who == "" {
		who = "container " + r.Container
		if r.Container == "" {
			who = "container"
		}
	}
	reasons := make([]string, len(r.Reasons))
	for i, x := range r.Reasons {
		reasons[i] = x.Field + ": want " + x.Want + " got " + x.Got
	}
	return "sharness-runtime: refused " + who + ": " + strings.Join(reasons, "; ")
}

// first is the reason logged under its own keys.
func (r *Refusal) first() Reason {
	if len(r.Reasons) == 0 {
		return Reason{}
	}
	return r.Reasons[0]
}

// because is a copy of r (who is refused) refused for rs; nil (allowed) when rs is empty.
func (r Refusal) because(rs []Reason) *Refusal {
	if len(rs) == 0 {
		return nil
	}
	r.Reasons = rs
	return &r
}

// with is a copy of r refused for one reason.
func (r Refusal) with(field, want, got string) *Refusal {
	return r.because([]Reason{{Field: field, Want: want, Got: got}})
}

// plain is a refusal before the component is known.
func plain(cmd runc.Command, field, want, got string) *Refusal {
	return Refusal{Container: cmd.ID}.with(field, want, got)
}
