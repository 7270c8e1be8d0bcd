package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// smallBody is what /small serves: a typical small API answer.
const smallBody = 512

// world stands in for the internet: an origin serving HTTPS (certificate from a throwaway CA)
// and plain HTTP on loopback, and a DNS server answering the origin's name with 127.0.0.1,
// the one special-range address net is told to exempt.
type world struct {
	name              string
	addr              netip.Addr
	tlsPort, httpPort uint16
	rawPort           uint16 // a TLS handshake, then plain bytes: see serveRaw
	dns               string // ip:port (UDP)
	roots             *x509.CertPool
	tlsSrv, httpSrv   *http.Server
	rawLn             net.Listener
	dnsConn           net.PacketConn
	queries           atomic.Int64 // DNS questions answered
	conns             atomic.Int64 // connections the origin accepted (HTTPS and HTTP)
}

func startWorld(name string) (*world, error) {
	w := &world{name: name, addr: netip.MustParseAddr("127.0.0.1")}
	cert, roots, err := throwawayCert(name)
	if err != nil {
		return nil, fmt.Errorf("make the origin's certificate: %w", err)
	}
	w.roots = roots
	mux := http.NewServeMux()
	body := make([]byte, 256<<10)
	rand.Read(body)
	mux.HandleFunc("/small", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Length", strconv.Itoa(smallBody))
		rw.Write(body[:smallBody])
	})
	mux.HandleFunc("/stream", func(rw http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
		if err != nil || n < 0 {
			http.Error(rw, "bytes=N", http.StatusBadRequest)
			return
		}
		rw.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(body)))
			if _, err := rw.Write(body[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	quiet := log.New(io.Discard, "", 0)
	count := func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			w.conns.Add(1)
		}
	}
	w.tlsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quiet, ConnState: count}
	w.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quiet, ConnState: count}
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tl.Close()
		return nil, err
	}
	w.tlsPort, w.httpPort = port(tl.Addr()), port(hl.Addr())
	if w.rawLn, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		tl.Close()
		hl.Close()
		return nil, err
	}
	w.rawPort = port(w.rawLn.Addr())
	go w.tlsSrv.Serve(tls.NewListener(tl, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}))
	go w.httpSrv.Serve(hl)
	go serveRaw(w.rawLn, &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true}, body, &w.conns)
	if w.dnsConn, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		w.close()
		return nil, err
	}
	w.dns = w.dnsConn.LocalAddr().String()
	go serveDNS(w.dnsConn, name, w.addr, &w.queries)
	return w, nil
}

func (w *world) close() {
	w.tlsSrv.Close()
	w.httpSrv.Close()
	w.rawLn.Close()
	if w.dnsConn != nil {
		w.dnsConn.Close()
	}
}

func (w *world) tlsAuthority() string { return net.JoinHostPort(w.name, strconv.Itoa(int(w.tlsPort))) }
func (w *world) httpAuthority() string {
	return net.JoinHostPort(w.name, strconv.Itoa(int(w.httpPort)))
}

func (w *world) rawAuthority() string { return net.JoinHostPort(w.name, strconv.Itoa(int(w.rawPort))) }

// serveRaw serves the plain-bytes bulk figure: a TLS handshake (a proxy that checks the
// ClientHello sees a real one) and a byte count (8 bytes, big-endian) inside TLS, then the
// origin writes that many bytes on the bare connection. With session tickets off, TLS 1.3
// sends nothing else, so those bytes are all that follows on the stream: through a proxy they
// cost the proxy what any tunnel's bytes cost it, and the two ends only a write and a read.
func serveRaw(ln net.Listener, conf *tls.Config, body []byte, conns *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(time.Minute))
			var n [8]byte
			if _, err := io.ReadFull(tls.Server(c, conf), n[:]); err != nil {
				return
			}
			for left := int64(binary.BigEndian.Uint64(n[:])); left > 0; {
				k, err := c.Write(body[:min(left, int64(len(body)))])
				if err != nil {
					return
				}
				left -= int64(k)
			}
		}()
	}
}

func port(a net.Addr) uint16 { return uint16(a.(*net.TCPAddr).Port) }

// throwawayCert makes a P-256 CA and a leaf for name, and returns the leaf and a pool of the CA.
func throwawayCert(name string) (tls.Certificate, *x509.CertPool, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netbench throwaway CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool, nil
}

// serveDNS answers A queries for name with addr, AAAA queries for it with no record, and
// every other name with NXDOMAIN, until pc is closed.
func serveDNS(pc net.PacketConn, name string, addr netip.Addr, queries *atomic.Int64) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		queries.Add(1)
		ours := strings.EqualFold(strings.TrimSuffix(q.Name.String(), "."), name)
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
		if !ours {
			rh.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
		b.StartQuestions()
		b.Question(q)
		b.StartAnswers()
		if ours && q.Type == dnsmessage.TypeA {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: addr.As4()})
		}
		if msg, err := b.Finish(); err == nil {
			pc.WriteTo(msg, from)
		}
	}
}
