package egress

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzNormalizeHost(f *testing.F) {
	for _, tc := range hostCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := NormalizeHost(s)
		if err != nil {
			if !h.IsZero() {
				t.Fatalf("NormalizeHost(%q) refused but returned %q", s, h)
			}
			if _, ok := err.(*HostError); !ok {
				t.Fatalf("NormalizeHost(%q) error %T is not a *HostError", s, err)
			}
			return
		}
		checkHost(t, s, h)
	})
}

// checkHost holds the properties of every accepted host.
func checkHost(t *testing.T, in string, h Host) {
	t.Helper()
	n := h.String()
	if _, err := netip.ParseAddr(n); err == nil {
		t.Fatalf("NormalizeHost(%q) = %q, an IP address", in, n)
	}
	labels := strings.Split(n, ".")
	if numLabel(labels[len(labels)-1]) {
		t.Fatalf("NormalizeHost(%q) = %q, which ends in a numeric label", in, n)
	}
	if len(n) > maxHost || strings.HasSuffix(n, ".") || n != strings.ToLower(n) || !utf8.ValidString(n) {
		t.Fatalf("NormalizeHost(%q) = %q, not in normal form", in, n)
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c > 0x7f || c == ':' || c == '[' || c == '%' {
			t.Fatalf("NormalizeHost(%q) = %q, has byte %q", in, n, c)
		}
	}
	if again, err := NormalizeHost(n); err != nil || again != h {
		t.Fatalf("NormalizeHost is not idempotent on %q: %q, %v", n, again, err)
	}
}

func FuzzParseAuthority(f *testing.F) {
	for _, tc := range authorityCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, port, err := ParseAuthority(s)
		if err != nil {
			if !h.IsZero() || port != 0 {
				t.Fatalf("ParseAuthority(%q) refused but returned %q, %d", s, h, port)
			}
			return
		}
		if port == 0 {
			t.Fatalf("ParseAuthority(%q) accepted port 0", s)
		}
		checkHost(t, s, h)
	})
}

func FuzzDecide(f *testing.F) {
	for _, tc := range decideCases {
		f.Add(tc.caller, tc.host, tc.port)
	}
	r, err := Compile(testRules())
	if err != nil {
		f.Fatal(err)
	}
	callers := map[string]bool{"agent": true, "bash": true, "llm": true, "noports": true}
	f.Fuzz(func(t *testing.T, caller, host string, port uint16) {
		h, err := NormalizeHost(host)
		if err != nil {
			h = Host{}
		}
		d := Decide(r, caller, h, port)
		if d.Rule == "" || d.Reason == "" {
			t.Fatalf("Decide(%q, %q, %d) = %+v without a rule or reason", caller, host, port, d)
		}
		asked := caller == "agent" && (h.String() == "gist.github.com" || h.String() == "deb.debian.org" || strings.HasSuffix(h.String(), ".pkg.example"))
		switch {
		case d.Ask && (d.Allow || d.Rule != RuleAsk || !asked || port != 443):
			t.Fatalf("Decide(%q, %q, %d) = %+v: an ask verdict for what is no ask host on the caller's ports", caller, host, port, d)
		case d.Allow && asked:
			t.Fatalf("Decide(%q, %q, %d) = %+v: an ask host allowed without the operator", caller, host, port, d)
		}
		if !d.Allow {
			return
		}
		switch {
		case !callers[caller]:
			t.Fatalf("Decide allowed caller %q, which has no rule: %+v", caller, d)
		case h.IsZero() || port == 0:
			t.Fatalf("Decide allowed %q port %d: %+v", host, port, d)
		case h.String() == "evil.github.com" || strings.HasSuffix(h.String(), ".internal.example.com"):
			t.Fatalf("Decide allowed a denied host %q: %+v", h, d)
		case caller == "noports":
			t.Fatalf("Decide allowed a caller without ports: %+v", d)
		}
	})
}
