package mtlstest_test

import (
	"crypto/tls"
	"net"
	"os"
	"testing"

	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/policies/pbp"
	"github.com/sharness-ai/sharness/testkit/mtlstest"
)

func TestSVIDChainsToBundle(t *testing.T) {
	ca := mtlstest.NewCA(t, "sharness.test")
	for _, role := range []string{"llm", "kms"} {
		svid := ca.SVID(t, role)
		if got, want := svid.ID.String(), "spiffe://sharness.test/"+role; got != want {
			t.Errorf("SVID(%q).ID = %s, want %s", role, got, want)
		}
	}
	other := mtlstest.NewCA(t, "sharness.test")
	if other.Cert().Equal(ca.Cert()) {
		t.Error("two CAs share a certificate")
	}
}

// TestHandshake: the CA's SVIDs and bundle work with mtls.ServerConfig and ClientConfig over a
// real TLS 1.3 connection, and a stranger's SVID from another CA is refused.
func TestHandshake(t *testing.T) {
	m, err := pbp.Load(os.DirFS("../../policies/testdata/full"), "manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ca := mtlstest.NewCA(t, m.TrustDomain)
	svids := ca.Session(t, m)
	if len(svids) != len(m.Components) {
		t.Fatalf("Session issued %d SVIDs for %d components", len(svids), len(m.Components))
	}
	client, err := mtls.ClientConfig(svids["llm"], ca.Bundle(), m, "llm", "kms")
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, client, mtls.ServerConfig(svids["kms"], ca.Bundle(), m, "kms")); err != nil {
		t.Fatalf("llm->kms: %v", err)
	}
	evil := mtlstest.NewCA(t, m.TrustDomain)
	client, _ = mtls.ClientConfig(evil.SVID(t, "llm"), ca.Bundle(), m, "llm", "kms")
	if err := handshake(t, client, mtls.ServerConfig(svids["kms"], ca.Bundle(), m, "kms")); err == nil {
		t.Fatal("llm SVID from a foreign CA: want a refusal")
	}
}

// handshake runs one connection over an in-memory pipe: the server sends one byte after its
// handshake, so the client learns of a refusal the server makes after the client finished.
func handshake(t *testing.T, client, server *tls.Config) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Server(b, server)
		if c.Handshake() == nil {
			_, _ = c.Write([]byte{1})
		}
		b.Close()
	}()
	c := tls.Client(a, client)
	if err := c.Handshake(); err != nil {
		return err
	}
	_, err := c.Read(make([]byte, 1))
	return err
}
