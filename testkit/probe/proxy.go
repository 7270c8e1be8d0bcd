package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

// Outcomes of net's refusals: the status and the rule in X-Sharness-Deny (images/net/egress).
const (
	ruleIPLiteral = "403 ip-literal"
	ruleHost      = "403 host-not-allowed|403 deny-host"
)

func proxyDoors(cfg config) []door {
	const literal = "an IP literal that skips the host allowlist and the range checks"
	var ds []door
	for _, l := range [][2]string{{"dotted", "10.0.0.1:443"}, {"decimal", "2130706433:443"}, {"octal", "0177.0.0.1:443"},
		{"hex", "0x7f.1:443"}, {"short", "127.1:443"}, {"ipv6", "[::1]:443"}, {"ipv4-mapped", "[::ffff:127.0.0.1]:443"},
		{"world-address", cfg.worldPort(443)}} {
		if l[1] != "" {
			ds = append(ds, sidedoor.Refusal("ip-literal/"+l[0], "CONNECT", l[1], ruleIPLiteral, literal, cfg.proxy))
		}
	}
	return append(ds,
		sidedoor.Refusal("special-range/private", "CONNECT", "private.sharness.test:443", "403 special-range:private-use",
			"a name that resolves into a private range", cfg.proxy),
		sidedoor.Refusal("special-range/metadata", "GET", "http://metadata.sharness.test/latest/meta-data/", "403 special-range:cloud-metadata",
			"the cloud metadata service, by a name that resolves to it", cfg.httpProxy),
		sidedoor.Refusal("special-range/loopback", "CONNECT", "loopback.sharness.test:443", "403 special-range:loopback",
			"net's own loopback, by a name that resolves to it", cfg.proxy),
		sidedoor.Refusal("denied-host/connect", "CONNECT", "denied.sharness.test:443", ruleHost, "a host the policy does not allow", cfg.proxy),
		sidedoor.Refusal("disallowed-port/8443", "CONNECT", "allowed.sharness.test:8443", "403 port-not-allowed",
			"an allowed host on a port the policy does not allow", cfg.proxy),
		sni("sni-mismatch", "denied.sharness.test", cfg.proxy),
		sni("sni-missing", "", cfg.proxy),
		door{Name: "redirect/to-denied-host", Expected: "302 then " + strings.ReplaceAll(ruleHost, "|", "|302 then "),
			Why: "a redirect from an allowed host to a denied one, followed", Try: redirect(cfg.httpProxy)},
	)
}

// sni opens an allowed tunnel, then starts TLS for another server name (or none): net must
// close the tunnel before any handshake completes (domain fronting, docs/pitfalls.md).
func sni(name, serverName string, proxy *url.URL) door {
	return door{Name: name, Expected: "tunnel closed", Why: "a TLS server name other than the CONNECT host",
		Try: func(ctx context.Context) (string, string) {
			resp, c, err := sidedoor.Request(ctx, proxy, http.MethodConnect, "allowed.sharness.test:443")
			if err != nil {
				return "proxy: " + sidedoor.Kind(err), ""
			}
			defer c.Close()
			if resp.StatusCode != http.StatusOK {
				return "CONNECT " + sidedoor.Verdict(resp), "the allowed tunnel was refused: nothing checked"
			}
			tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}) // any handshake fails the door
			switch k := sidedoor.Kind(tc.HandshakeContext(ctx)); k {
			case "ok":
				return "handshake completed", "server name " + tc.ConnectionState().ServerName
			case "EOF", "ECONNRESET", "EPIPE":
				return "tunnel closed", "sent SNI " + strconv.Quote(serverName)
			default:
				return k, ""
			}
		}}
}

// redirect asks an allowed host for a redirect to a denied one and follows it by hand.
func redirect(proxy *url.URL) func(context.Context) (string, string) {
	return func(ctx context.Context) (string, string) {
		resp, c, err := sidedoor.Request(ctx, proxy, http.MethodGet, "http://allowed.sharness.test/redirect")
		if err != nil {
			return "proxy: " + sidedoor.Kind(err), ""
		}
		c.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != "http://denied.sharness.test/" {
			return sidedoor.Verdict(resp), "first hop, Location " + strconv.Quote(loc)
		}
		if resp, c, err = sidedoor.Request(ctx, proxy, http.MethodGet, "http://denied.sharness.test/"); err != nil {
			return "302 then proxy: " + sidedoor.Kind(err), ""
		}
		c.Close()
		return "302 then " + sidedoor.Verdict(resp), ""
	}
}

// allowedDoors are the paths that must work: curl and git over HTTPS through net, verifying
// the world's certificate against SHARNESS_PROBE_CA_PEM.
func allowedDoors(cfg config) []door {
	const url = "https://allowed.sharness.test/"
	return []door{
		{Name: "allowed-curl", Expected: "hello from allowed.sharness.test", Limit: 5 * time.Second,
			Why: "an allowlisted host over HTTPS through net, certificate verified", Try: func(ctx context.Context) (string, string) {
				if cfg.ca == "" {
					return "not configured", "no SHARNESS_PROBE_CA_PEM"
				}
				return sidedoor.Command(ctx, nil, "curl", "-fsS", "--max-time", "4", "--cacert", cfg.ca, url)
			}},
		{Name: "allowed-curl/verifies-certificate", Expected: "exit 60|exit 77", Limit: 5 * time.Second,
			Why: "without the world's CA curl must refuse the certificate", Try: func(ctx context.Context) (string, string) {
				return sidedoor.Command(ctx, nil, "curl", "-fsS", "--max-time", "4", url)
			}},
		{Name: "allowed-git/clone", Expected: "cloned", Limit: 10 * time.Second,
			Why: "git clone of an allowlisted repository over HTTPS through net", Try: func(ctx context.Context) (string, string) {
				if cfg.ca == "" {
					return "not configured", "no SHARNESS_PROBE_CA_PEM"
				}
				dir := filepath.Join(os.TempDir(), "sharness-probe-clone-"+token(4))
				defer os.RemoveAll(dir)
				got, note := sidedoor.Command(ctx, []string{"HOME=" + os.TempDir(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1"},
					"git", "-c", "http.sslCAInfo="+cfg.ca, "-c", "init.templateDir=", "clone", "-q", url+"repo.git", dir)
				if _, err := os.Stat(filepath.Join(dir, "README")); got == "" && err == nil {
					return "cloned", note
				}
				return got, note
			}},
	}
}

// worldPort is the world's address with port, or "" when it is not configured.
func (c config) worldPort(port int) string {
	if !c.world.IsValid() {
		return ""
	}
	return net.JoinHostPort(c.world.String(), strconv.Itoa(port))
}
