// Package mtls is the mutual TLS 1.3 that SHarness components speak to each other: identities
// are X.509 SVIDs obtained through the SPIFFE Workload API (from the launcher, or SPIRE), and
// every connection is authorized against the policy's edge list on both sides
// (docs/architecture.md, "The wall").
//
// What it guarantees, given a session bundle that holds only the session CA:
//   - A server accepts a client only if the client proves possession of an SVID that chains to
//     the bundle, whose SPIFFE ID is a component of the manifest, and the manifest has an edge
//     from that component to the server.
//   - A client refuses to build a configuration for a server it has no edge to, and accepts only
//     a certificate carrying that one server's SPIFFE ID.
//   - TLS 1.3 only. Authorization runs in VerifyPeerCertificate (go-spiffe) and again in
//     VerifyConnection, which Go also calls on resumed sessions, where VerifyPeerCertificate is
//     skipped (docs/pitfalls.md, "TLS and identities"). Servers issue no session tickets.
//
// What it does not guarantee: that the process holding a key is the component it names (a
// compromised component can use its own SVID, on its own edges); revocation (an SVID lives as
// long as the session: there is no CRL or OCSP); anything about the bytes exchanged; network
// separation, which is the compose file's internal networks' job. Validity depends on the clock.
package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/sharness-ai/sharness/policies/pbp"
)

// EnvEndpointSocket is the SPIFFE Workload API address variable (SPIFFE Workload Endpoint spec).
const EnvEndpointSocket = "SPIFFE_ENDPOINT_SOCKET"

// SourceTimeout bounds how long Source waits for the first SVID.
const SourceTimeout = 10 * time.Second

// ErrNoEdge is returned (wrapped) whenever the manifest has no edge for a connection.
var ErrNoEdge = errors.New("no edge in the policy")

// Allowed reports whether the manifest has an edge from → to. It is the one decision every
// check in this package comes down to.
func Allowed(m *pbp.Manifest, from, to string) bool {
	if m == nil || m.Component(from) == nil || m.Component(to) == nil {
		return false
	}
	for _, e := range m.Edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}

// Peer returns the component of the manifest whose SPIFFE ID is id.
func Peer(m *pbp.Manifest, id spiffeid.ID) (*pbp.Component, error) {
	if m != nil {
		for _, c := range m.Components {
			if c.SPIFFEID == id.String() {
				return c, nil
			}
		}
	}
	return nil, fmt.Errorf("peer %s is no component of the policy", id)
}

// PeerComponent returns the component on the other end of a connection that completed a
// handshake with a configuration from this package: net uses it to pick the caller's rules.
func PeerComponent(m *pbp.Manifest, cs tls.ConnectionState) (*pbp.Component, error) {
	if !cs.HandshakeComplete || len(cs.PeerCertificates) == 0 {
		return nil, errors.New("peer presented no certificate")
	}
	id, err := x509svid.IDFromCert(cs.PeerCertificates[0])
	if err != nil {
		return nil, fmt.Errorf("peer certificate: %w", err)
	}
	return Peer(m, id)
}

// AuthorizeClients is the server side's authorizer: the client must be a component with an edge
// into self.
func AuthorizeClients(m *pbp.Manifest, self string) tlsconfig.Authorizer {
	return func(id spiffeid.ID, _ [][]*x509.Certificate) error {
		c, err := Peer(m, id)
		if err != nil {
			return fmt.Errorf("refuse client: %w", err)
		}
		if !Allowed(m, c.Name, self) {
			return fmt.Errorf("refuse client %s: %w from %s to %s", id, ErrNoEdge, c.Name, self)
		}
		return nil
	}
}

// AuthorizeServer is the client side's authorizer: the server must be exactly the component
// named server, and the manifest must have an edge self → server.
func AuthorizeServer(m *pbp.Manifest, self, server string) tlsconfig.Authorizer {
	return func(id spiffeid.ID, _ [][]*x509.Certificate) error {
		if !Allowed(m, self, server) {
			return fmt.Errorf("refuse server %s: %w from %s to %s", id, ErrNoEdge, self, server)
		}
		c, err := Peer(m, id)
		if err != nil {
			return fmt.Errorf("refuse server: %w", err)
		}
		if c.Name != server {
			return fmt.Errorf("refuse server %s: it is %s, not %s", id, c.Name, server)
		}
		return nil
	}
}

// ServerConfig returns the configuration of a server run by component self: it presents self's
// SVID from src and requires a client SVID that AuthorizeClients accepts. A self that is not a
// component, or has no edge into it, refuses every client.
func ServerConfig(src x509svid.Source, bundles x509bundle.Source, m *pbp.Manifest, self string) *tls.Config {
	authorize := AuthorizeClients(m, self)
	cfg := tlsconfig.MTLSServerConfig(src, bundles, authorize)
	harden(cfg, bundles, authorize)
	// Without tickets there is nothing to resume; VerifyConnection covers a config that turns
	// them back on (docs/pitfalls.md, "TLS and identities").
	cfg.SessionTicketsDisabled = true
	return cfg
}

// ClientConfig returns the configuration for component self to dial server. It refuses to build
// one, with an error wrapping ErrNoEdge, unless the manifest has an edge self → server.
func ClientConfig(src x509svid.Source, bundles x509bundle.Source, m *pbp.Manifest, self, server string) (*tls.Config, error) {
	if !Allowed(m, self, server) {
		return nil, fmt.Errorf("dial %s as %s: %w", server, self, ErrNoEdge)
	}
	return clientConfig(src, bundles, m, self, server), nil
}

// clientConfig is ClientConfig without the refusal before dialing, so tests can prove the
// handshake refuses on its own.
func clientConfig(src x509svid.Source, bundles x509bundle.Source, m *pbp.Manifest, self, server string) *tls.Config {
	authorize := AuthorizeServer(m, self, server)
	cfg := tlsconfig.MTLSClientConfig(src, bundles, authorize)
	harden(cfg, bundles, authorize)
	return cfg
}

// harden makes a go-spiffe configuration TLS 1.3 only and authorizes again in VerifyConnection.
func harden(cfg *tls.Config, bundles x509bundle.Source, authorize tlsconfig.Authorizer) {
	cfg.MinVersion = tls.VersionTLS13
	cfg.MaxVersion = tls.VersionTLS13
	cfg.VerifyConnection = VerifyConnection(bundles, authorize)
}

// VerifyConnection returns a tls.Config.VerifyConnection callback that verifies the peer's SVID
// against bundles and authorizes it. Go calls it on every handshake, resumed ones included, so
// a session resumed from a ticket or a client cache is checked as if it were new.
func VerifyConnection(bundles x509bundle.Source, authorize tlsconfig.Authorizer) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if cs.Version != tls.VersionTLS13 {
			return fmt.Errorf("refuse TLS version %#x: only TLS 1.3", cs.Version)
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("refuse peer: no certificate")
		}
		id, chains, err := x509svid.Verify(cs.PeerCertificates, bundles)
		if err != nil {
			return fmt.Errorf("refuse peer: %w", err)
		}
		return authorize(id, chains)
	}
}

// Source connects to the Workload API named by SPIFFE_ENDPOINT_SOCKET and waits, at most
// SourceTimeout, for this workload's SVID. Every failure says "missing SVID" and is meant to
// stop the component: without its identity a component must not serve (fail closed).
func Source(ctx context.Context) (*workloadapi.X509Source, error) {
	return source(ctx, os.Getenv(EnvEndpointSocket), SourceTimeout)
}

func source(ctx context.Context, addr string, timeout time.Duration) (*workloadapi.X509Source, error) {
	if addr == "" {
		return nil, fmt.Errorf("missing SVID: %s is not set; fail closed", EnvEndpointSocket)
	}
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "unix" || u.Path == "" {
		return nil, fmt.Errorf("missing SVID: %s=%q is not a unix:///path address; fail closed", EnvEndpointSocket, addr)
	}
	if _, err := os.Stat(u.Path); err != nil {
		return nil, fmt.Errorf("missing SVID: no Workload API socket at %s (is the launcher healthy and this role's identity volume mounted?): %w; fail closed", u.Path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	src, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(addr)))
	if err != nil {
		return nil, fmt.Errorf("missing SVID: no answer from the Workload API at %s within %s: %w; fail closed", u.Path, timeout, err)
	}
	return src, nil
}
