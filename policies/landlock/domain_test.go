package landlock

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeParse(t *testing.T) {
	d := Domain{Mode: Enforce, Exec: []string{"/usr/bin/", "/a", "/a"}, Write: []string{"/tmp", "/dev/shm"},
		Bind: []uint16{8080}, Connect: []uint16{8443, 53, 8443}}
	enc := d.Encode()
	want := `{"mode":"enforce","exec":["/a","/usr/bin/"],"write":["/dev/shm","/tmp"],"bind":[8080],"connect":[53,8443],"any_connect":false}`
	if enc != want {
		t.Fatalf("Encode = %s\nwant     %s", enc, want)
	}
	back, err := Parse(enc)
	if err != nil {
		t.Fatal(err)
	}
	if back.Encode() != enc {
		t.Errorf("round trip: %s", back.Encode())
	}
	if e := (Domain{Mode: PerCommand}).Encode(); e != `{"mode":"per_command","exec":[],"write":[],"bind":[],"connect":[],"any_connect":false}` {
		t.Errorf("empty lists encode as %s", e)
	}
}

func TestParseRefuses(t *testing.T) {
	ok := `"exec":[],"write":[],"bind":[],"connect":[],"any_connect":false`
	tests := []struct{ name, in, wantErr string }{
		{"unknown mode", `{"mode":"off",` + ok + `}`, `mode "off"`},
		{"no mode", `{` + ok + `}`, `mode ""`},
		{"relative exec", `{"mode":"enforce","exec":["bin/sh"],"write":[],"bind":[],"connect":[],"any_connect":false}`, "not absolute"},
		{"unclean exec", `{"mode":"enforce","exec":["/usr/../bin/sh"],"write":[],"bind":[],"connect":[],"any_connect":false}`, "not absolute"},
		{"folder write", `{"mode":"enforce","exec":[],"write":["/tmp/"],"bind":[],"connect":[],"any_connect":false}`, `ends in "/"`},
		{"port 0", `{"mode":"enforce","exec":[],"write":[],"bind":[0],"connect":[],"any_connect":false}`, "port 0"},
		{"port out of range", `{"mode":"enforce","exec":[],"write":[],"bind":[70000],"connect":[],"any_connect":false}`, "landlock domain"},
		{"unknown field", `{"mode":"enforce",` + ok + `,"read":["/"]}`, "landlock domain"},
		{"duplicate key", `{"mode":"enforce","mode":"best_effort",` + ok + `}`, "landlock domain"},
		{"case-folded key", `{"Mode":"enforce",` + ok + `}`, "landlock domain"},
		{"not JSON", `mode=enforce`, "landlock domain"},
		{"unsorted", `{"mode":"enforce","exec":["/b","/a"],"write":[],"bind":[],"connect":[],"any_connect":false}`, "canonical"},
		{"spaced", `{"mode": "enforce",` + ok + `}`, "canonical"},
		{"too large", `{"mode":"enforce","exec":["/` + strings.Repeat("a", maxDomain) + `"]}`, "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzParse: the parser of a domain (it reaches the helper as an argument) never panics, and what
// it accepts encodes to a domain it accepts again, unchanged.
func FuzzParse(f *testing.F) {
	f.Add(`{"mode":"enforce","exec":["/a"],"write":["/tmp"],"bind":[1],"connect":[53],"any_connect":true}`)
	f.Add(`{"mode":"per_command","exec":[],"write":[],"bind":[],"connect":[],"any_connect":false}`)
	f.Add(`{"mode":"enforce","mode":"x"}`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(d.Encode())
		if err != nil {
			t.Fatalf("re-parse of %s: %v", d.Encode(), err)
		}
		if diff := cmp.Diff(d.Encode(), again.Encode()); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}
