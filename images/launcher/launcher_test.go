//lint:file-ignore SA1019 TestDestroy inspects the scalar destroy wipes

package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	workloadpb "github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/mtls"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

const fixture = "../../policies/testdata/full"

func loadFull(t *testing.T) *pbp.Manifest {
	t.Helper()
	m, err := pbp.Load(os.DirFS(fixture), "manifest.yaml")
	if err != nil {
		t.Fatalf("load fixture: %v", err)
	}
	return m
}

// testConfig is a launcher config on a fresh, short identity root (socket paths are limited to
// 108 bytes) accepting the fixture's hash.
func testConfig(t *testing.T, m *pbp.Manifest, log io.Writer) config {
	t.Helper()
	root, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	for _, c := range m.Components {
		mkdir(t, root, c.Name) // the identity volumes compose mounts
	}
	env := map[string]string{session.EnvPolicyHash: m.Hash, session.EnvComponent: "launcher"}
	return config{
		policyDir:     fixture,
		identityRoot:  root,
		sessionLength: time.Hour,
		auditDir:      t.TempDir(),
		getenv:        func(k string) string { return env[k] },
		log:           slog.New(slog.NewJSONHandler(log, nil)),
	}
}

// start runs the launcher in-process until the test ends and waits until it is healthy.
func start(t *testing.T, cfg config) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	var once sync.Once
	var runErr error
	stop = func() error { once.Do(func() { cancel(); runErr = <-done }); return runErr }
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := health(context.Background(), cfg)
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("launcher stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("launcher never healthy: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { stop() })
	return stop
}

func addr(cfg config, role string) string { return "unix://" + socketPath(cfg.identityRoot, role) }

// TestServe fetches each role's SVID with go-spiffe's own X509Source and checks it.
func TestServe(t *testing.T) {
	m := loadFull(t)
	var log bytes.Buffer
	cfg := testConfig(t, m, &log)
	stop := start(t, cfg)

	var caSum string
	for _, c := range m.Components {
		if c.Kind == pbp.KindLauncher {
			if _, err := os.Stat(socketPath(cfg.identityRoot, c.Name)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the launcher serves itself: %v", err)
			}
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			fi, err := os.Stat(socketPath(cfg.identityRoot, c.Name))
			if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != fs.ModeSocket {
				t.Fatalf("socket: %v, %v; want a 0666 socket", fi, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			src, err := workloadapi.NewX509Source(ctx, workloadapi.WithClientOptions(workloadapi.WithAddr(addr(cfg, c.Name))))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			s, err := src.GetX509SVID()
			if err != nil {
				t.Fatal(err)
			}
			if got := s.ID.String(); got != c.SPIFFEID {
				t.Errorf("SVID ID = %s, want %s", got, c.SPIFFEID)
			}
			if _, _, err := x509svid.Verify(s.Certificates, src); err != nil {
				t.Errorf("go-spiffe refuses the SVID against the bundle: %v", err)
			}
			b, err := src.GetX509BundleForTrustDomain(spiffeid.RequireTrustDomainFromString(m.TrustDomain))
			if err != nil || len(b.X509Authorities()) != 1 {
				t.Fatalf("bundle: %v, %v; want the session CA alone", b, err)
			}
			ca := b.X509Authorities()[0]
			if !ca.IsCA || ca.MaxPathLen != 0 || !ca.MaxPathLenZero || ca.KeyUsage != x509.KeyUsageCertSign {
				t.Errorf("CA: IsCA %v MaxPathLen %d MaxPathLenZero %v KeyUsage %v; want a CA of path length 0 that only signs certificates", ca.IsCA, ca.MaxPathLen, ca.MaxPathLenZero, ca.KeyUsage)
			}
			if len(ca.URIs) != 1 || ca.URIs[0].String() != "spiffe://"+m.TrustDomain {
				t.Errorf("CA URIs = %v, want spiffe://%s", ca.URIs, m.TrustDomain)
			}
			leaf := s.Certificates[0]
			if !leaf.NotAfter.Equal(ca.NotAfter) || leaf.SerialNumber.BitLen() < 64 {
				t.Errorf("leaf NotAfter %v (CA %v), serial of %d bits", leaf.NotAfter, ca.NotAfter, leaf.SerialNumber.BitLen())
			}
			sum := sha256.Sum256(ca.Raw)
			if caSum == "" {
				caSum = hex.EncodeToString(sum[:])
			} else if caSum != hex.EncodeToString(sum[:]) {
				t.Error("roles got different session CAs")
			}
		})
	}
	if err := stop(); err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
	if !strings.Contains(log.String(), `"session_ca_sha256":"`+caSum+`"`) {
		t.Errorf("log does not record session_ca_sha256 %s:\n%s", caSum, log.String())
	}
	checkRecord(t, m, cfg.auditDir, caSum)
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}

// TestSocketServesOnlyItsRole: through the raw API, each socket holds one SVID and one bundle,
// refuses a call without the security header, and has no JWT API.
func TestSocketServesOnlyItsRole(t *testing.T) {
	m := loadFull(t)
	cfg := testConfig(t, m, io.Discard)
	start(t, cfg)
	for _, c := range m.Components {
		if c.Kind == pbp.KindLauncher {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			conn, err := grpc.NewClient(addr(cfg, c.Name), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			api := workloadpb.NewSpiffeWorkloadAPIClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()

			bare, err := api.FetchX509SVID(ctx, &workloadpb.X509SVIDRequest{})
			if err == nil {
				_, err = bare.Recv()
			}
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("FetchX509SVID without the header: %v, want PermissionDenied", err)
			}

			hctx := metadata.AppendToOutgoingContext(ctx, "workload.spiffe.io", "true")
			stream, err := api.FetchX509SVID(hctx, &workloadpb.X509SVIDRequest{})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Svids) != 1 || resp.Svids[0].SpiffeId != c.SPIFFEID || len(resp.FederatedBundles) != 0 {
				t.Errorf("response holds %d SVIDs (first %q), %d federated bundles; want %s alone", len(resp.Svids), resp.Svids[0].GetSpiffeId(), len(resp.FederatedBundles), c.SPIFFEID)
			}
			bs, err := api.FetchX509Bundles(hctx, &workloadpb.X509BundlesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			bundles, err := bs.Recv()
			if err != nil || len(bundles.Bundles) != 1 || bundles.Bundles["spiffe://"+m.TrustDomain] == nil {
				t.Errorf("bundles = %v, %v; want the session bundle alone", bundles, err)
			}
			if _, err := api.FetchJWTSVID(hctx, &workloadpb.JWTSVIDRequest{Audience: []string{"x"}}); status.Code(err) != codes.Unimplemented {
				t.Errorf("FetchJWTSVID: %v, want Unimplemented", err)
			}
			if _, err := api.ValidateJWTSVID(hctx, &workloadpb.ValidateJWTSVIDRequest{Audience: "x", Svid: "y"}); status.Code(err) != codes.Unimplemented {
				t.Errorf("ValidateJWTSVID: %v, want Unimplemented", err)
			}
			js, err := api.FetchJWTBundles(hctx, &workloadpb.JWTBundlesRequest{})
			if err == nil {
				_, err = js.Recv()
			}
			if status.Code(err) != codes.Unimplemented {
				t.Errorf("FetchJWTBundles: %v, want Unimplemented", err)
			}
		})
	}
}

// TestMTLSThroughLauncher: two components get their SVIDs from the launcher with mtls.Source and
// speak mutual TLS on their edge.
func TestMTLSThroughLauncher(t *testing.T) {
	m := loadFull(t)
	cfg := testConfig(t, m, io.Discard)
	start(t, cfg)
	source := func(role string) *workloadapi.X509Source {
		t.Setenv(mtls.EnvEndpointSocket, addr(cfg, role))
		src, err := mtls.Source(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src
	}
	agent, llm := source("agent"), source("llm")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", mtls.ServerConfig(llm, llm, m, "llm"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, io.LimitReader(c, 1))
	}()
	ccfg, err := mtls.ClientConfig(agent, agent, m, "agent", "llm")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
	if err != nil {
		t.Fatalf("agent->llm: %v", err)
	}
	defer c.Close()
	b := []byte{7}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 7 {
		t.Fatalf("echo: %v %v", b, err)
	}
}

// TestRefusal: a policy other than the supplied one stops the launcher before any socket exists,
// with exit code 2 and one line on stderr.
func TestRefusal(t *testing.T) {
	m := loadFull(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"wrong hash", map[string]string{session.EnvPolicyHash: "sha256:" + strings.Repeat("0", 64), session.EnvComponent: "launcher"}, "refusing to start"},
		{"no hash", map[string]string{session.EnvComponent: "launcher"}, "no policy hash supplied"},
		{"not the launcher", map[string]string{session.EnvPolicyHash: m.Hash, session.EnvComponent: "agent"}, "not the launcher"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, m, io.Discard)
			cfg.getenv = func(k string) string { return tc.env[k] }
			err := run(context.Background(), cfg)
			if !errors.As(err, new(*refusal)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run = %v, want a refusal containing %q", err, tc.want)
			}
			assertNoSockets(t, cfg.identityRoot)

			var stderr bytes.Buffer
			args := []string{"--policy-dir", fixture, "--identity-root", cfg.identityRoot}
			if code := cli(context.Background(), args, cfg.getenv, &stderr); code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("stderr = %q, want one line containing %q", stderr.String(), tc.want)
			}
			assertNoSockets(t, cfg.identityRoot)
		})
	}
}

func assertNoSockets(t *testing.T, root string) {
	t.Helper()
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("%s exists after a refusal", p)
		}
		return nil
	})
}

// TestHealthExit: exit 0 while every socket answers, 1 once they are gone or hold a stranger.
func TestHealthExit(t *testing.T) {
	m := loadFull(t)
	cfg := testConfig(t, m, io.Discard)
	args := []string{"health", "--policy-dir", fixture, "--identity-root", cfg.identityRoot}
	var stderr bytes.Buffer
	if code := cli(context.Background(), args, cfg.getenv, &stderr); code != 1 || !strings.Contains(stderr.String(), "unhealthy") {
		t.Errorf("before start: exit %d, stderr %q; want 1 and a reason", code, stderr.String())
	}
	stop := start(t, cfg)
	stderr.Reset()
	if code := cli(context.Background(), args, cfg.getenv, &stderr); code != 0 {
		t.Errorf("while serving: exit %d, stderr %q; want 0", code, stderr.String())
	}
	// A socket that accepts but serves another role's SVID is unhealthy.
	ids, err := issue(m, "launcher", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Components {
		if c.Kind == pbp.KindLauncher {
			continue
		}
		role := c.Name
		if role == "net" {
			role = "kms" // net's socket hands out kms's SVID
		}
		ln, err := listen(cfg.identityRoot, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		srv := newServer(ids, role)
		go srv.Serve(ln)
		defer srv.Stop()
	}
	stderr.Reset()
	if code := cli(context.Background(), args, cfg.getenv, &stderr); code != 1 || !strings.Contains(stderr.String(), "role net") {
		t.Errorf("with a wrong SVID on net's socket: exit %d, stderr %q; want 1 naming net", code, stderr.String())
	}
}

// TestNoCAKeyRetained: what issue returns, and what the servers hold, has no place for a private
// key other than each role's PKCS#8 bytes, each of which is that role's own leaf key.
func TestNoCAKeyRetained(t *testing.T) {
	signer := reflect.TypeFor[crypto.Signer]()
	var walk func(reflect.Type, string, map[reflect.Type]bool)
	walk = func(ty reflect.Type, path string, seen map[reflect.Type]bool) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch {
		case ty.Kind() == reflect.Interface:
			t.Errorf("%s is an interface (%s): it could hold a key", path, ty)
		case ty.Implements(signer) || reflect.PointerTo(ty).Implements(signer):
			t.Errorf("%s is a signer (%s)", path, ty)
		case ty == reflect.TypeFor[big.Int]():
			t.Errorf("%s is a big.Int", path)
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(ty.Elem(), path+"[]", seen)
		case reflect.Map:
			walk(ty.Key(), path+"{key}", seen)
			walk(ty.Elem(), path+"{}", seen)
		case reflect.Struct:
			for i := range ty.NumField() {
				walk(ty.Field(i).Type, path+"."+ty.Field(i).Name, seen)
			}
		}
	}
	walk(reflect.TypeFor[identities](), "identities", map[reflect.Type]bool{})
	e := reflect.TypeFor[endpoint]()
	for i := range e.NumField() {
		if f := e.Field(i); !f.Anonymous { // the embedded Unimplemented server is empty
			walk(f.Type, "endpoint."+f.Name, map[reflect.Type]bool{})
		}
	}

	m := loadFull(t)
	ids, err := issue(m, "launcher", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(ids.caDER)
	if err != nil {
		t.Fatal(err)
	}
	all := maps.Clone(ids.svids)
	all["launcher"] = ids.self // its own, for its audit log
	for role, s := range all {
		key, err := x509.ParsePKCS8PrivateKey(s.keyDER)
		if err != nil {
			t.Fatal(err)
		}
		pub := key.(*ecdsa.PrivateKey).Public().(*ecdsa.PublicKey)
		leaf, err := x509.ParseCertificate(s.certDER)
		if err != nil {
			t.Fatal(err)
		}
		if !pub.Equal(leaf.PublicKey) || pub.Equal(ca.PublicKey) {
			t.Errorf("%s: the key held is not its own leaf key (or is the CA's)", role)
		}
	}
	if len(ids.svids) != len(m.Components)-1 {
		t.Errorf("issued %d SVIDs, want one per component but the launcher (%d)", len(ids.svids), len(m.Components)-1)
	}
}

// TestDestroy: a destroyed key's scalar words are zero and it can no longer sign.
func TestDestroy(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	words := k.D.Bits()
	digest := sha256.Sum256([]byte("x"))
	if _, err := k.Sign(rand.Reader, digest[:], crypto.SHA256); err != nil {
		t.Fatal(err)
	}
	destroy(k)
	for i, w := range words[:cap(words)] {
		if w != 0 {
			t.Errorf("word %d of the scalar survived", i)
		}
	}
	if k.D.Sign() != 0 {
		t.Error("scalar is not zero")
	}
	if _, err := k.Sign(rand.Reader, digest[:], crypto.SHA256); err == nil {
		t.Error("a destroyed key still signs")
	}
}

// TestStaleSocket: a socket left by a crashed launcher is replaced; anything else is not, and a
// missing identity folder is not made.
func TestStaleSocket(t *testing.T) {
	root, err := os.MkdirTemp("", "sl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	mkdir(t, root, "agent")
	stale, err := net.Listen("unix", socketPath(root, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	ln, err := listen(root, "agent")
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln.Close()

	mkdir(t, root, "net")
	if err := os.WriteFile(socketPath(root, "net"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listen(root, "net"); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("listen over a file: %v, want a refusal", err)
	}
	// A role whose identity volume is not mounted gets no socket.
	if _, err := listen(root, "kms"); err == nil {
		t.Error("listen without an identity folder: want an error")
	}
}

func mkdir(t *testing.T, root, role string) string {
	t.Helper()
	dir := filepath.Join(root, role)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestParse(t *testing.T) {
	env := map[string]string{envSessionLength: "2h", envIdentityRoot: "/env/root", audit.EnvDir: "/env/audit"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name    string
		args    []string
		want    config
		wantErr string
	}{
		{"env", nil, config{policyDir: session.PolicyDir, identityRoot: "/env/root", sessionLength: 2 * time.Hour, auditDir: "/env/audit"}, ""},
		{"flags win", []string{"health", "--identity-root", "/f", "--session-length", "1h", "--policy-dir", "/p", "--audit-dir", "/a"}, config{verb: "health", policyDir: "/p", identityRoot: "/f", sessionLength: time.Hour, auditDir: "/a"}, ""},
		{"unknown verb", []string{"serve"}, config{}, "unknown command"},
		{"extra args", []string{"health", "--policy-dir", "/p", "x"}, config{}, "unexpected arguments"},
		{"too short", []string{"--session-length", "1s"}, config{}, "session length"},
		{"too long", []string{"--session-length", "8760h"}, config{}, "session length"},
		{"bad flag", []string{"--nope"}, config{}, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(tc.args, getenv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, new(*refusal)) {
					t.Fatalf("parse error = %v, want a refusal containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			type view struct {
				verb, policyDir, identityRoot, auditDir string
				length                                  time.Duration
			}
			g, w := view{got.verb, got.policyDir, got.identityRoot, got.auditDir, got.sessionLength}, view{tc.want.verb, tc.want.policyDir, tc.want.identityRoot, tc.want.auditDir, tc.want.sessionLength}
			if g != w {
				t.Errorf("parse = %+v, want %+v", g, w)
			}
		})
	}
}
