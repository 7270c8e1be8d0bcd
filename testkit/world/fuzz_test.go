package main

import (
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FuzzAnswer feeds arbitrary bytes to the DNS answerer: it must never panic, and whatever it
// sends back must be a well-formed response to the same ID.
func FuzzAnswer(f *testing.F) {
	for _, name := range []string{"allowed.sharness.test.", "nope.sharness.test.", "6869.t.sharness.test."} {
		for _, qt := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeTXT, dnsmessage.TypeAAAA} {
			f.Add(query(f, 1, name, qt))
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c})
	z := newZone(self)
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, _, ok := z.answer(msg)
		if !ok {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(out)
		if err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		if !h.Response || len(msg) < 2 || h.ID != uint16(msg[0])<<8|uint16(msg[1]) {
			t.Fatalf("reply header %+v does not answer the query", h)
		}
	})
}

// FuzzParseHosts: WORLD_EXTRA_HOSTS never panics the parser, and what it accepts is a zone of
// lower-case names and IPv4 addresses that leaves the world's own names alone.
func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{"", "api.anthropic.com=10.214.0.11", "a=1.2.3.4,b=5.6.7.8", "a.=1.2.3.4", "allowed.sharness.test=1.1.1.1", "=", ","} {
		f.Add(s)
	}
	own := newZone(self)
	f.Fuzz(func(t *testing.T, s string) {
		z, err := parseHosts(s)
		if err != nil {
			return
		}
		for name, a := range z {
			if _, clash := own[name]; clash || name != strings.ToLower(name) || !isName(name) || !a.Is4() {
				t.Fatalf("accepted %q = %v from %q", name, a, s)
			}
		}
	})
}
