package egress

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/policies/pbp"
)

func mustHost(t testing.TB, s string) Host {
	t.Helper()
	h, err := NormalizeHost(s)
	if err != nil {
		t.Fatalf("NormalizeHost(%q): %v", s, err)
	}
	return h
}

// testRules is the policy the Decide table and the fuzz test run against.
func testRules() *pbp.NetRules {
	return &pbp.NetRules{
		Callers: &[]pbp.CallerRule{
			{Caller: "agent", Hosts: []string{"example.com", "*.github.com", "proxy.golang.org"}, Ports: []int{443}, Presets: []string{"debian"},
				Ask: []string{"gist.github.com", "*.pkg.example", "deb.debian.org", "evil.github.com"}},
			{Caller: "bash", Hosts: []string{"deb.debian.org", "*.example.org"}, Ports: []int{80, 443}},
			{Caller: "llm", Presets: []string{"anthropic-api", "debian"}},
			{Caller: "noports", Hosts: []string{"example.net"}, Ask: []string{"ask.example.net"}},
		},
		DenyHosts: []string{"evil.github.com", "*.internal.example.com"},
	}
}

var decideCases = []struct {
	name, caller, host string
	port               uint16
	allow              bool
	rule               string
}{
	{"exact host", "agent", "example.com", 443, true, "hosts"},
	{"exact host wrong port", "agent", "example.com", 80, false, RulePortNotAllowed},
	{"exact host subdomain", "agent", "www.example.com", 443, false, RuleHostNotAllowed},
	{"wildcard subdomain", "agent", "api.github.com", 443, true, "hosts"},
	{"wildcard deep subdomain", "agent", "a.b.github.com", 443, true, "hosts"},
	{"wildcard bare suffix", "agent", "github.com", 443, false, RuleHostNotAllowed},
	{"wildcard look-alike", "agent", "evilgithub.com", 443, false, RuleHostNotAllowed},
	{"wildcard suffix-extended", "agent", "api.github.com.evil.net", 443, false, RuleHostNotAllowed},
	{"deny wins over wildcard", "agent", "evil.github.com", 443, false, RuleDenyHost},
	{"deny wildcard", "bash", "x.internal.example.com", 443, false, RuleDenyHost},
	{"deny applies to unknown caller", "kms", "evil.github.com", 443, false, RuleDenyHost},
	{"preset host", "agent", "security.debian.org", 443, true, "preset:debian"},
	{"preset narrowed to caller ports", "agent", "deb.debian.org", 80, false, RulePortNotAllowed},
	{"preset on its own ports", "llm", "deb.debian.org", 80, true, "preset:debian"},
	{"preset model api", "llm", "api.anthropic.com", 443, true, "preset:anthropic-api"},
	{"preset port outside preset", "llm", "api.anthropic.com", 80, false, RulePortNotAllowed},
	{"preset not named", "bash", "api.anthropic.com", 443, false, RuleHostNotAllowed},
	{"second caller", "bash", "deb.debian.org", 80, true, "hosts"},
	{"other caller's host", "bash", "example.com", 443, false, RuleHostNotAllowed},
	{"no ports listed", "noports", "example.net", 443, false, RulePortNotAllowed},
	{"unknown caller", "kms", "example.com", 443, false, RuleNoCallerRule},
	{"empty caller", "", "example.com", 443, false, RuleNoCallerRule},
	{"port zero", "agent", "example.com", 0, false, RulePortNotAllowed},
	{"zero host", "agent", "", 443, false, RuleInvalidHost},
	{"ask host", "agent", "gist.github.com", 443, false, RuleAsk},
	{"ask wins over a wildcard host", "agent", "gist.github.com", 443, false, RuleAsk},
	{"ask host on another port", "agent", "gist.github.com", 80, false, RulePortNotAllowed},
	{"ask wildcard", "agent", "a.b.pkg.example", 443, false, RuleAsk},
	{"ask wildcard bare suffix", "agent", "pkg.example", 443, false, RuleHostNotAllowed},
	{"ask wins over a preset", "agent", "deb.debian.org", 443, false, RuleAsk},
	{"deny wins over ask", "agent", "evil.github.com", 443, false, RuleDenyHost},
	{"other caller's ask host", "bash", "gist.github.com", 443, false, RuleHostNotAllowed},
	{"other caller's ask host is its host", "bash", "deb.debian.org", 443, true, "hosts"},
	{"ask without ports", "noports", "ask.example.net", 443, false, RulePortNotAllowed},
	{"ask for an unknown caller", "kms", "gist.github.com", 443, false, RuleNoCallerRule},
}

func TestDecide(t *testing.T) {
	r, err := Compile(testRules())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range decideCases {
		t.Run(tc.name, func(t *testing.T) {
			var h Host
			if tc.host != "" {
				h = mustHost(t, tc.host)
			}
			d := Decide(r, tc.caller, h, tc.port)
			if d.Allow != tc.allow || d.Rule != tc.rule || d.Ask != (tc.rule == RuleAsk) {
				t.Fatalf("Decide(%q, %q, %d) = %+v; want allow=%v rule=%s", tc.caller, tc.host, tc.port, d, tc.allow, tc.rule)
			}
			if d.Reason == "" || strings.Contains(d.Reason, "\n") {
				t.Fatalf("reason %q is not one sentence", d.Reason)
			}
		})
	}
}

func TestDecideNoRules(t *testing.T) {
	h := mustHost(t, "example.com")
	if d := Decide(nil, "agent", h, 443); d.Allow || d.Rule != RuleNoRules {
		t.Errorf("nil rules: %+v", d)
	}
	r, err := Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := Decide(r, "agent", h, 443); d.Allow || d.Rule != RuleNoCallerRule {
		t.Errorf("empty rules: %+v", d)
	}
	if d := (Decision{}); d.Allow {
		t.Error("the zero Decision allows")
	}
}

func TestCompileErrors(t *testing.T) {
	caller := func(c pbp.CallerRule) *pbp.NetRules { return &pbp.NetRules{Callers: &[]pbp.CallerRule{c}} }
	for _, tc := range []struct {
		name  string
		rules *pbp.NetRules
		want  string
	}{
		{"unknown preset", caller(pbp.CallerRule{Caller: "agent", Presets: []string{"crates"}}), `unknown preset "crates"`},
		{"empty caller", caller(pbp.CallerRule{Hosts: []string{"example.com"}}), "empty caller name"},
		{"duplicate caller", &pbp.NetRules{Callers: &[]pbp.CallerRule{{Caller: "a"}, {Caller: "a"}}}, "two rules"},
		{"upper case host", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"Example.com"}}), "not in normal form"},
		{"trailing dot", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"example.com."}}), "not in normal form"},
		{"u-label", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"bücher.example"}}), "not in normal form"},
		{"ip host", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"10.0.0.1"}}), RuleIPLiteral},
		{"decimal ip host", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"2130706433"}}), RuleIPLiteral},
		{"wildcard tld", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"*.com"}}), "public suffix"},
		{"wildcard public suffix", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"*.co.uk"}}), "public suffix"},
		{"double wildcard", caller(pbp.CallerRule{Caller: "a", Hosts: []string{"*.*.example.com"}}), RuleInvalidHost},
		{"port zero", caller(pbp.CallerRule{Caller: "a", Ports: []int{0}}), "out of range"},
		{"port too big", caller(pbp.CallerRule{Caller: "a", Ports: []int{65536}}), "out of range"},
		{"bad deny host", &pbp.NetRules{DenyHosts: []string{"169.254.169.254"}}, "deny_hosts[0]"},
		{"ip ask host", caller(pbp.CallerRule{Caller: "a", Ask: []string{"10.0.0.1"}}), "ask: "},
		{"ask wildcard tld", caller(pbp.CallerRule{Caller: "a", Ask: []string{"*.com"}}), "public suffix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.rules)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCompileFixture runs the shared fixture's effective net policy (L3 narrowed by L4).
func TestCompileFixture(t *testing.T) {
	m, err := pbp.Load(os.DirFS("../../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := m.Component("net")
	r, err := Compile(c.Business.Net)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caller, host string
		port         uint16
		rule         string
	}{
		{"agent", "proxy.golang.org", 443, "hosts"},
		{"agent", "github.com", 443, RuleHostNotAllowed}, // L4 narrowed it away
		{"agent", "storage.googleapis.com", 443, RuleHostNotAllowed},
		{"llm", "api.anthropic.com", 443, "hosts"},
		{"bash", "deb.debian.org", 443, "hosts"},
		{"bash", "deb.debian.org", 80, RulePortNotAllowed},
		{"agent", "metadata.google.internal", 443, RuleDenyHost},
		{"agent", "169.254.169.254.nip.io", 443, RuleDenyHost},
		{"kms", "api.anthropic.com", 443, RuleNoCallerRule},
	} {
		if d := Decide(r, tc.caller, mustHost(t, tc.host), tc.port); d.Rule != tc.rule {
			t.Errorf("Decide(%s, %s, %d) = %+v; want rule %s", tc.caller, tc.host, tc.port, d, tc.rule)
		}
	}
}

func TestPresets(t *testing.T) {
	want := []string{"anthropic-api", "debian", "github", "go-proxy", "npm", "pypi"}
	if got := Presets(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Presets() = %v; want %v", got, want)
	}
	for name, p := range presets {
		if len(p.hosts) == 0 || len(p.ports) == 0 {
			t.Errorf("preset %s has no hosts or no ports", name)
		}
		for _, h := range p.hosts {
			if _, err := compilePattern(h); err != nil || strings.HasPrefix(h, "*") {
				t.Errorf("preset %s: host %q: %v", name, h, err)
			}
		}
	}
	r, err := Compile(&pbp.NetRules{Callers: &[]pbp.CallerRule{{Caller: "agent", Presets: []string{"go-proxy"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The Go proxy answers zip downloads with a redirect to storage.googleapis.com.
	if d := Decide(r, "agent", mustHost(t, "storage.googleapis.com"), 443); !d.Allow {
		t.Errorf("go-proxy preset without its redirect target: %+v", d)
	}
}

func TestRefused(t *testing.T) {
	_, err := NormalizeHost("127.1")
	if d := Refused(err); d.Allow || d.Rule != RuleIPLiteral || d.Reason == "" {
		t.Errorf("Refused(%v) = %+v", err, d)
	}
	if d := Refused(os.ErrInvalid); d.Allow || d.Rule != RuleInvalidHost {
		t.Errorf("Refused(other) = %+v", d)
	}
	if d := RefuseSpecial("loopback"); d.Allow || d.Rule != "special-range:loopback" {
		t.Errorf("RefuseSpecial = %+v", d)
	}
}

// TestPure holds the line of the package comment: egress decides and does no I/O. It checks
// the direct imports (golang.org/x/net/publicsuffix brings net/http/cookiejar along for an
// interface assertion; nothing here calls it).
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		switch imp {
		case "net", "net/http", "os", "os/exec", "log", "log/slog", "syscall", "io/fs":
			t.Errorf("egress imports %s", imp)
		}
	}
}

func TestHasAsk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules *pbp.NetRules
		want  bool
	}{
		{"none", nil, false},
		{"hosts only", &pbp.NetRules{Callers: &[]pbp.CallerRule{{Caller: "a", Hosts: []string{"example.com"}}}}, false},
		{"an ask host", testRules(), true},
	} {
		r, err := Compile(tc.rules)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.HasAsk(); got != tc.want {
			t.Errorf("%s: HasAsk = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (*Rules)(nil).HasAsk() {
		t.Error("nil rules have ask hosts")
	}
}

// TestConnectRequest: the bytes an approval binds name the caller, the host in normal form and
// the port, each apart; the summary says the same for a person.
func TestConnectRequest(t *testing.T) {
	c, s := ConnectRequest("bash", mustHost(t, "Gist.GitHub.com."), 443)
	if string(c) != `{"v":1,"caller":"bash","host":"gist.github.com","port":443}` || s != "bash connects to gist.github.com port 443" {
		t.Errorf("ConnectRequest = %s, %q", c, s)
	}
	seen := map[string]bool{string(c): true}
	for _, other := range [][]byte{
		first(ConnectRequest("agent", mustHost(t, "gist.github.com"), 443)),
		first(ConnectRequest("bash", mustHost(t, "api.github.com"), 443)),
		first(ConnectRequest("bash", mustHost(t, "gist.github.com"), 80)),
	} {
		if seen[string(other)] {
			t.Errorf("two requests share the bytes %s", other)
		}
		seen[string(other)] = true
	}
}

func first(b []byte, _ string) []byte { return b }
