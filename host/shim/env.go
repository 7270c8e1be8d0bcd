package shim

import (
	"slices"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/keys"
)

// envPrefix marks the variables SHarness's components read their settings from. Security
// switches among them (llm's extra CA, net's resolver and allowed addresses, the launcher's
// session length) must come from the policy, not from a compose file (docs/architecture.md, "The
// runtime shim"; docs/inputs.md).
const envPrefix = "SHARNESS_AI_"

// goSwitches are the variables the Go runtime and standard library read as security switches in
// every component: the TLS trust roots (crypto/x509 reads SSL_CERT_FILE and SSL_CERT_DIR in place
// of the system's: SSL_CERT_FILE=/proc/self/environ and a certificate in another variable would
// make llm trust a CA of the compose file's choosing, as its UNSAFE switch does) and GODEBUG
// (which turns off TLS and X.509 checks one by one). Like SHARNESS_AI_ variables, they are
// allowed only as the compiled spec carries them.
//
// The same holds for the proxy variables Go's net/http (and curl, git) obey, which would send a
// component's requests through a proxy of the compose file's choosing, and the dynamic loader's,
// which would load a library of its choosing into any dynamically linked program the container
// runs (found by an attack on the running stack: HTTPS_PROXY and LD_PRELOAD passed).
var goSwitches = []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "GODEBUG",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"}

// envException is a SHARNESS_AI_ variable whose value the compiled spec cannot carry, and the
// only values it may have. kinds lists the component kinds it may appear in; testWorld marks a
// test switch, allowed only where the compiled spec's compile.AnnotationTestEnv lists it (a test
// world's policy grants it, under the hash; a production policy grants none).
type envException struct {
	why       string
	kinds     []string
	testWorld bool
	allows    func(value string) bool
}

// gatedKinds are the components that wait on the person's approvals (compile.GateVolume).
var gatedKinds = []string{"net", "kms", "bash", "fs"}

// envExceptions are the SHARNESS_AI_ variables the compose file (compose/render.go) and the
// offline world (compose/world.yml) set whose value the compiled spec cannot carry: the person's
// own inputs at `up`, and the world's throwaway CA, which the world's policy grants to llm (its
// test_world.llm_ca). net's resolver and allowed addresses are no exception: net reads them from
// its verified policy (policies/world), and the shim refuses the variables like any other the
// compiled spec does not set. TestEnvExceptions holds the list against what Docker wrote for the
// stack and the world (testdata/docker-20.10): every entry used, none missing. The person's inputs
// are gaps the session record closes (issue 16, part 4): an edited compose file can still choose
// their values, within the bounds given here.
var envExceptions = map[string]envException{
	// Each component refuses a mounted manifest that does not hash to the first or is not signed
	// by the second (internal/session), so a wrong value stops the stack (TestLauncherRefuses
	// counts on that); but which manifest is mounted is not bound yet, so together with another
	// manifest folder they can name another policy.
	"SHARNESS_AI_POLICY_HASH": {
		why:   "the hash the person supplies (up --policy-hash): empty or sha256:<64 hex>",
		kinds: nil, allows: func(v string) bool { return v == "" || keys.CheckHash(v) == nil },
	},
	"SHARNESS_AI_POLICY_KEY": {
		why:   "the key the person pins instead of a hash: empty or ed25519:<base64>",
		kinds: nil, allows: func(v string) bool { return v == "" || strings.HasPrefix(v, "ed25519:") },
	},
	"SHARNESS_AI_OPERATOR_PUBKEY": {
		why:   "the person's approval key (sharness-ai operator init): not bound to the installed policy yet",
		kinds: gatedKinds, allows: func(string) bool { return true },
	},
	"SHARNESS_AI_GATE_TIMEOUT": {
		why:   "how long an approval waits: empty (the component's default) or a positive duration",
		kinds: gatedKinds, allows: func(v string) bool {
			d, err := time.ParseDuration(v)
			return v == "" || err == nil && d > 0
		},
	},
	compile.EnvLLMUnsafeCA: {
		why:   "a test world's throwaway CA (testkit/worldca makes one per run), only under a policy whose test_world.llm_ca grants it",
		kinds: []string{"llm"}, testWorld: true, allows: func(v string) bool { return strings.HasPrefix(v, "-----BEGIN CERTIFICATE-----") },
	},
}

// testEnvGranted says whether the compiled spec lets the person set the test switch name
// (compile.AnnotationTestEnv, written only for a policy with test_world).
func testEnvGranted(want *specs.Spec, name string) bool {
	return slices.Contains(strings.Split(want.Annotations[compile.AnnotationTestEnv], ","), name)
}

// checkEnv refuses every switch, a SHARNESS_AI_ variable or one of goSwitches (in any letter
// case: a lower-case spelling is refused rather than guessed about), that the compiled
// environment does not hold with the same value and that no envException allows. An entry
// without "=" is refused too: execve passes it.
func checkEnv(c *comparison, field string, want, got []string) []Reason {
	kind := c.want.Annotations[compile.AnnotationKind]
	var out []Reason
	for _, e := range got {
		name, value, _ := strings.Cut(e, "=")
		if !isSwitch(name) || slices.Contains(want, e) {
			continue
		}
		x, ok := envExceptions[name]
		if ok && (x.kinds == nil || slices.Contains(x.kinds, kind)) && (!x.testWorld || testEnvGranted(c.want, name)) &&
			strings.Contains(e, "=") && x.allows(value) {
			continue
		}
		out = append(out, Reason{Field: field + "[" + name + "]", Want: compiledValue(want, name), Got: strconv.Quote(clip(value))})
	}
	return out
}

func isSwitch(name string) bool {
	up := strings.ToUpper(name)
	return strings.HasPrefix(up, envPrefix) || slices.Contains(goSwitches, up)
}

// compiledValue is what the compiled environment sets name to, as a refusal says it.
func compiledValue(env []string, name string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return strconv.Quote(v)
		}
	}
	if x, ok := envExceptions[name]; ok {
		return "unset, or " + x.why
	}
	return "unset (the compiled spec does not set it)"
}
