package main

import (
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
