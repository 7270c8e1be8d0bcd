package shim

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sharness-ai/sharness/policies/compile"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// Docker's per-container /etc files (/etc/hosts, /etc/resolv.conf, /etc/hostname) are binds of
// files Docker writes under <dockerRoot>/containers/<id>/ from the container's settings, which
// the compiled spec does not carry: `extra_hosts` adds lines to hosts, `dns_search` and
// `dns_opt` to resolv.conf, and `dns` names the resolvers Docker's embedded resolver forwards
// the names it does not know to. Go's resolver reads /etc/hosts first, so one extra line points
// an allowlisted name (net's destination, or net itself for the agent) at any address. Measured
// on Engine 20.10: when the runtime creates the container, resolv.conf holds the `dns` servers
// (or, without them, the host's resolv.conf less its loopback resolvers), with the search
// domains and options; Docker rewrites it to its embedded resolver (`nameserver 127.0.0.11`,
// `options ndots:0`) in its prestart hook, after the create, keeping the servers in memory only.
// The shim reads each file's contents and the engine's DNS settings (hostconfig.json) as facts
// (EtcFile), and allows only what the compiled stack makes Docker write:
//
//   - hosts: Docker's own lines (localhost, the IPv6 names) and lines naming only the
//     container's own hostname, at an address;
//   - resolv.conf: the `dns` servers as nameservers and nothing else, or, without them, the
//     host's copy; or the embedded resolver's two lines (a container Docker started before);
//   - hostname: the compiled hostname;
//   - the engine's DNS settings: no search domain and no option; forwarders as compose gives
//     them (compose.NoDNS, 0.0.0.0, on every component but the egress and the launcher, which
//     have none), so that neither a resolver of the caller's nor the host's (CVE-2024-29018:
//     Engine 20.10 forwards from the host's namespace to a loopback resolver) answers.

// EtcFile is one of Docker's per-container /etc files as the host found it.
type EtcFile struct {
	Content string // what the file holds (at most maxEtcFile bytes)
	// Engine is the engine's DNS settings for the container (its hostconfig.json), read beside
	// resolv.conf; nil for the other files.
	Engine *EngineDNS
	// Host is the host's resolv.conf (Docker's source for a container without a network),
	// beside resolv.conf.
	Host string
	Err  string // why the file, or the settings beside it, could not be read
}

// EngineDNS are the DNS settings the engine keeps for a container (hostconfig.json).
type EngineDNS struct {
	DNS, Search, Options []string
}

// maxEtcFile caps what the shim reads of one /etc file or hostconfig.json.
const maxEtcFile = 1 << 20

// embeddedResolver is Docker's embedded DNS server, the only nameserver Docker writes into the
// resolv.conf of a container on a user-defined network.
const embeddedResolver = "127.0.0.11"

// noDNS is compose.NoDNS (compose/render.go): the forwarder compose gives every component but the
// egress and the launcher.
const noDNS = "0.0.0.0"

// dockerHosts are the lines Docker 20.10 writes at the top of every container's hosts file.
var dockerHosts = map[string][]string{
	"127.0.0.1": {"localhost"},
	"::1":       {"localhost", "ip6-localhost", "ip6-loopback"},
	"fe00::0":   {"ip6-localnet"},
	"ff00::0":   {"ip6-mcastprefix"},
	"ff02::1":   {"ip6-allnodes"},
	"ff02::2":   {"ip6-allrouters"},
}

// dockerHostsNames are Docker's own names for addr, however the engine spells the address: Docker
// 20.10 writes fe00::0 and ff00::0, Engine 29 fe00:: and ff00:: (measured).
func dockerHostsNames(addr string) ([]string, bool) {
	if names, ok := dockerHosts[addr]; ok {
		return names, true
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, false
	}
	for k, names := range dockerHosts {
		if b, err := netip.ParseAddr(k); err == nil && b == a {
			return names, true
		}
	}
	return nil, false
}

// HostsLine is one entry of a hosts file: an address and the names it gives it.
type HostsLine struct {
	Addr  string
	Names []string
}

// ParseHosts reads a hosts file the way resolvers do: one entry per line, fields split by spaces
// or tabs, "#" to the end of the line a comment. It refuses NUL bytes, a line with an address but
// no name, and an address that is not one (so that no line is read two ways).
func ParseHosts(data string) ([]HostsLine, error) {
	if strings.ContainsRune(data, 0) {
		return nil, fmt.Errorf("hosts: a NUL byte")
	}
	var out []HostsLine
	for i, line := range strings.Split(data, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("hosts: line %d: an address without a name", i+1)
		}
		if _, err := netip.ParseAddr(f[0]); err != nil {
			return nil, fmt.Errorf("hosts: line %d: %q is not an address", i+1, clip(f[0]))
		}
		out = append(out, HostsLine{Addr: f[0], Names: f[1:]})
	}
	return out, nil
}

// ResolvConf is what a resolv.conf says, as the resolvers of the stack's images read it (glibc,
// musl, Go): its nameservers, search domains and options, each line kept whole.
type ResolvConf struct {
	Lines []string // "nameserver 127.0.0.11", "options ndots:0", ... in order, fields joined by one space
}

// ParseResolvConf reads a resolv.conf: comments ("#" or ";" first) and blank lines dropped,
// every other line's fields joined by one space. It refuses NUL bytes and any keyword resolvers
// read but the stack does not write (nameserver, search, domain, options and sortlist are read;
// anything else is refused rather than guessed at).
func ParseResolvConf(data string) (ResolvConf, error) {
	if strings.ContainsRune(data, 0) {
		return ResolvConf{}, fmt.Errorf("resolv.conf: a NUL byte")
	}
	var rc ResolvConf
	for i, line := range strings.Split(data, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver", "search", "domain", "options", "sortlist":
		default:
			return ResolvConf{}, fmt.Errorf("resolv.conf: line %d: keyword %q", i+1, clip(f[0]))
		}
		rc.Lines = append(rc.Lines, strings.Join(f, " "))
	}
	return rc, nil
}

// ParseEngineDNS reads the DNS settings from dockerd's hostconfig.json.
func ParseEngineDNS(data []byte) (EngineDNS, error) {
	var h struct{ DNS, DNSSearch, DNSOptions []string }
	if err := json.Unmarshal(data, &h); err != nil {
		return EngineDNS{}, fmt.Errorf("hostconfig.json: %w", err)
	}
	return EngineDNS{DNS: h.DNS, Search: h.DNSSearch, Options: h.DNSOptions}, nil
}

// checkEtcFile decides the contents of one of Docker's /etc files (dest is its destination).
// want's hostname and kind say what the compiled stack makes Docker write there.
func checkEtcFile(want *specs.Spec, field, dest string, s Source) (Reason, bool) {
	e := s.Etc
	switch {
	case e == nil:
		return Reason{Field: field, Want: "contents the shim read", Got: "not read"}, false
	case e.Err != "":
		return Reason{Field: field, Want: "contents the shim can read", Got: e.Err}, false
	}
	switch path.Base(dest) {
	case "hostname":
		if strings.TrimSuffix(e.Content, "\n") != want.Hostname {
			return Reason{Field: field, Want: fmt.Sprintf("%q", want.Hostname), Got: fmt.Sprintf("%q", clip(e.Content))}, false
		}
	case "hosts":
		return checkHosts(field, want.Hostname, e.Content)
	case "resolv.conf":
		return checkResolv(want, field, e)
	}
	return Reason{}, true
}

// checkHosts: Docker's own lines, and lines that name only the container's own hostname.
// Limitation: such a line may give the hostname any address (extra_hosts naming the container
// itself): only the container's connections to itself follow it.
func checkHosts(field, hostname, content string) (Reason, bool) {
	lines, err := ParseHosts(content)
	if err != nil {
		return Reason{Field: field, Want: "a hosts file", Got: err.Error()}, false
	}
	for _, l := range lines {
		if names, ok := dockerHostsNames(l.Addr); ok && slices.Equal(names, l.Names) {
			continue
		}
		if hostname != "" && slices.Equal(l.Names, []string{hostname}) {
			continue
		}
		return Reason{Field: field, Want: "Docker's own lines (localhost, the IPv6 names, <address> " + hostname + ")",
			Got: fmt.Sprintf("line %q", clip(l.Addr+" "+strings.Join(l.Names, " ")))}, false
	}
	return Reason{}, true
}

// checkResolv: the engine's forwarders as compose sets them (dnsAllowed), no search domain and
// no option, and the file Docker writes from them: those servers, or the host's copy without
// them, before the container starts; its embedded resolver's after.
func checkResolv(want *specs.Spec, field string, e *EtcFile) (Reason, bool) {
	rc, err := ParseResolvConf(e.Content)
	if err != nil {
		return Reason{Field: field, Want: "a resolv.conf", Got: err.Error()}, false
	}
	d := e.Engine
	if d == nil {
		return Reason{Field: field, Want: "the engine's DNS settings read", Got: "not read"}, false
	}
	if len(d.Search) > 0 || len(d.Options) > 0 {
		return Reason{Field: field, Want: "no dns_search, no dns_opt", Got: "search " + listOrNone(d.Search) + ", options " + listOrNone(d.Options)}, false
	}
	if allowed := dnsAllowed(want); !slices.ContainsFunc(allowed, func(a []string) bool { return slices.Equal(a, d.DNS) }) {
		var names []string
		for _, a := range allowed {
			names = append(names, "["+strings.Join(a, ",")+"]")
		}
		return Reason{Field: field, Want: "dns " + strings.Join(names, " or "), Got: "dns [" + strings.Join(d.DNS, ",") + "]"}, false
	}
	embedded := []string{"nameserver " + embeddedResolver, "options ndots:0"}
	var servers []string
	for _, a := range d.DNS {
		servers = append(servers, "nameserver "+a)
	}
	host, herr := ParseResolvConf(e.Host)
	switch {
	case slices.Equal(rc.Lines, embedded):
	case len(d.DNS) > 0 && slices.Equal(rc.Lines, servers):
	case len(d.DNS) == 0 && herr == nil && hostCopy(rc.Lines, host.Lines):
	default:
		want := "the host's resolv.conf"
		if len(d.DNS) > 0 {
			want = strings.Join(servers, "; ")
		}
		return Reason{Field: field, Want: want + " or Docker's embedded resolver (" + strings.Join(embedded, "; ") + ")",
			Got: clip(strings.Join(rc.Lines, "; "))}, false
	}
	return Reason{}, true
}

// hostCopy: got is the host's resolv.conf as Docker copies it for a container without a network
// of its own, its loopback nameservers left out (libnetwork's FilterResolvDNS).
func hostCopy(got, host []string) bool {
	var want []string
	for _, l := range host {
		if a, ok := strings.CutPrefix(l, "nameserver "); ok {
			if ip, err := netip.ParseAddr(a); err == nil && ip.IsLoopback() {
				continue
			}
		}
		want = append(want, l)
	}
	return len(want) > 0 && slices.Equal(got, want)
}

// dnsAllowed are the forwarders the compiled stack gives a component (compose/render.go): none
// for the egress (net resolves through the host's resolvers) and the launcher (no network),
// which may also take noDNS (it narrows), and exactly noDNS for every other.
func dnsAllowed(want *specs.Spec) [][]string {
	switch pbp.Kind(want.Annotations[compile.AnnotationKind]) {
	case pbp.KindNet, pbp.KindLauncher:
		return [][]string{nil, {noDNS}}
	}
	return [][]string{{noDNS}}
}
