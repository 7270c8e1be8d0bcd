//go:build e2e

package e2e

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsLogger is a resolver on the host that answers nothing and remembers every name it was
// asked: the detector for DNS that leaves the stack.
type dnsLogger struct {
	mu    sync.Mutex
	names []string
}

func startDNSLogger(t *testing.T, addr string) *dnsLogger {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatalf("start the host DNS logger on %s (the CVE-2024-29018 condition needs a resolver on the host's loopback): %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	l := &dnsLogger{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if name, ok := questionName(buf[:n]); ok {
				l.mu.Lock()
				l.names = append(l.names, name)
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// selfTest proves the logger records a query sent to it, so its silence later means something.
func (l *dnsLogger) selfTest(t *testing.T, addr string) {
	t.Helper()
	name := fmt.Sprintf("self-test-%d.example.", time.Now().UnixNano())
	q := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, RecursionDesired: true})
	q.StartQuestions()
	q.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	msg, err := q.Finish()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(msg)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(l.seen(strings.TrimSuffix(name, "."))) > 0 {
			return
		}
	}
	t.Fatalf("the host DNS logger did not record its own test query %s: it could not see a leak either", name)
}

// seen returns the logged names that contain any of the fragments.
func (l *dnsLogger) seen(fragments ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range l.names {
		for _, f := range fragments {
			if strings.Contains(n, f) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// questionName reads the first question's name of a DNS message (RFC 1035 §4.1), without
// compression, which queries do not use.
func questionName(msg []byte) (string, bool) {
	if len(msg) < 12 || binary.BigEndian.Uint16(msg[4:6]) == 0 {
		return "", false
	}
	var labels []string
	for i := 12; i < len(msg); {
		n := int(msg[i])
		if n == 0 {
			return strings.Join(labels, "."), true
		}
		if n > 63 || i+1+n > len(msg) {
			return "", false
		}
		labels = append(labels, string(msg[i+1:i+1+n]))
		i += 1 + n
	}
	return "", false
}

// startHostService listens on every host address: a service the stack must not reach.
func startHostService(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host service\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// hostAddrs lists host:port for every IPv4 address of the host except loopback, plus the
// gateway address of every edge network in the pool: the paths an internal network leaves open
// unless its bridge has no host-side address.
func hostAddrs(t *testing.T, port int, gateways ...string) string {
	t.Helper()
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range ifaddrs {
		ip, _, err := net.ParseCIDR(a.String())
		if err != nil || ip.To4() == nil || ip.IsLoopback() {
			continue
		}
		out = append(out, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	}
	for _, g := range gateways {
		out = append(out, net.JoinHostPort(g, strconv.Itoa(port)))
	}
	return strings.Join(out, ",")
}
