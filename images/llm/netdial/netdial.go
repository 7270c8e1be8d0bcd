// Package netdial is the client side of the stack's only way out: a component that must reach
// the outside world (llm, for the model API) dials net's mutual-TLS proxy port with its SVID,
// asks CONNECT for the one address, and speaks TLS to that address inside the tunnel, so net sees
// the server name and nothing else.
//
// What it does not guarantee: anything net does not decide. The tunnel is only as narrow as
// net's rules for the caller, and the TLS inside it is only as good as the roots given.
package netdial

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Through returns a DialContext that reaches addr only through net's mTLS proxy listener: TCP to
// proxy, mutual TLS with llm's SVID (conf, from mtls.ClientConfig), CONNECT addr, then the
// connection is the tunnel. The http.Transport then speaks TLS to the upstream over it, so net
// sees the SNI and nothing else.
func Through(proxy string, conf *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", proxy)
		if err != nil {
			return nil, fmt.Errorf("dial net at %s: %w", proxy, err)
		}
		conn := tls.Client(raw, conf)
		ok := false
		defer func() {
			if !ok {
				conn.Close()
			}
		}()
		deadline, has := ctx.Deadline()
		if !has {
			deadline = time.Now().Add(30 * time.Second)
		}
		_ = conn.SetDeadline(deadline)
		if err := conn.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("mTLS to net at %s: %w", proxy, err)
		}
		if _, err := fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr); err != nil {
			return nil, fmt.Errorf("CONNECT %s through net: %w", addr, err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return nil, fmt.Errorf("CONNECT %s through net: %w", addr, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("CONNECT %s through net: %s (deny: %q)", addr, resp.Status, resp.Header.Get("X-Sharness-Deny"))
		}
		// The upstream speaks only after our ClientHello, so nothing may be buffered yet.
		if br.Buffered() > 0 {
			return nil, fmt.Errorf("CONNECT %s through net: data before the tunnel opened", addr)
		}
		_ = conn.SetDeadline(time.Time{})
		ok = true
		return conn, nil
	}
}

// Transport is the HTTP client transport to the upstream through dial (Through). It never reads
// proxy settings from the environment: net is the only way out.
func Transport(dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 15 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
}

// Roots is the system's roots, plus the CA certificates in unsafeCAPEM when it is set (an
// offline test world's model API, handed over by environment).
func Roots(unsafeCAPEM string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("system roots: %w", err)
	}
	if unsafeCAPEM == "" {
		return pool, nil
	}
	if !pool.AppendCertsFromPEM([]byte(unsafeCAPEM)) {
		return nil, errors.New("unsafe CA: no PEM certificate")
	}
	return pool, nil
}
