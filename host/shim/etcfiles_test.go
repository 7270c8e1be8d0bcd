package shim

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dockerHostsFile is what Docker 20.10 wrote into net's /etc/hosts (measured).
const dockerHostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n" +
	"ff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n172.21.0.2\tnet\n"

func TestParseHosts(t *testing.T) {
	tests := []struct {
		name, in string
		want     []HostsLine
		err      bool
	}{
		{name: "empty"},
		{name: "Docker's", in: dockerHostsFile, want: []HostsLine{
			{"127.0.0.1", []string{"localhost"}}, {"::1", []string{"localhost", "ip6-localhost", "ip6-loopback"}},
			{"fe00::0", []string{"ip6-localnet"}}, {"ff00::0", []string{"ip6-mcastprefix"}}, {"ff02::1", []string{"ip6-allnodes"}},
			{"ff02::2", []string{"ip6-allrouters"}}, {"172.21.0.2", []string{"net"}}}},
		{name: "comments and spaces", in: "# x\n  10.0.0.1   a b # c\n\n", want: []HostsLine{{"10.0.0.1", []string{"a", "b"}}}},
		{name: "an address without a name", in: "10.0.0.1\n", err: true},
		{name: "not an address", in: "example.com net\n", err: true},
		{name: "a NUL", in: "10.0.0.1 a\x00b\n", err: true},
		{name: "carriage returns are spaces", in: "10.0.0.1 a\r\n", want: []HostsLine{{"10.0.0.1", []string{"a"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHosts(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      bool
	}{
		{name: "the embedded resolver's", in: "nameserver 127.0.0.11\noptions ndots:0\n", want: []string{"nameserver 127.0.0.11", "options ndots:0"}},
		{name: "what dns_search and dns_opt add (measured)", in: "search evil.test\nnameserver 127.0.0.11\noptions use-vc ndots:0\n",
			want: []string{"search evil.test", "nameserver 127.0.0.11", "options use-vc ndots:0"}},
		{name: "comments", in: "# generated\n; x\nnameserver\t10.0.0.1\n", want: []string{"nameserver 10.0.0.1"}},
		{name: "an unknown keyword", in: "lookup file bind\n", err: true},
		{name: "a NUL", in: "nameserver 10.0.0.1\x00\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResolvConf(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got.Lines); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEngineDNS(t *testing.T) {
	got, err := ParseEngineDNS([]byte(`{"Dns":["0.0.0.0"],"DnsOptions":null,"DnsSearch":["x.test"],"ExtraHosts":["a:1.2.3.4"]}`))
	if err != nil || !slices.Equal(got.DNS, []string{"0.0.0.0"}) || len(got.Options) != 0 || !slices.Equal(got.Search, []string{"x.test"}) {
		t.Errorf("got %+v, %v", got, err)
	}
	if _, err := ParseEngineDNS([]byte(`{"Dns":"0.0.0.0"}`)); err == nil {
		t.Error("a string for the list was accepted")
	}
}

// FuzzEtcFiles: the parsers of Docker's /etc files never panic, and what checkHosts allows holds
// only Docker's lines and the hostname's.
func FuzzEtcFiles(f *testing.F) {
	for _, s := range []string{dockerHostsFile, "nameserver 127.0.0.11\noptions ndots:0\n", "search a\n", "10.0.0.1\n", "# x\n::1 a b\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		_, _ = ParseResolvConf(data)
		_, _ = ParseEngineDNS([]byte(data))
		lines, err := ParseHosts(data)
		if _, ok := checkHosts("mounts[/etc/hosts]", "net", data); ok {
			if err != nil {
				t.Fatalf("allowed a hosts file that does not parse: %q", data)
			}
			for _, l := range lines {
				if names, own := dockerHosts[l.Addr]; !(own && slices.Equal(names, l.Names)) && strings.Join(l.Names, " ") != "net" {
					t.Fatalf("allowed line %v", l)
				}
			}
		}
	})
}
