// Package bundletest changes export bundles as an attacker would, for the tests of host/bundle
// and of the import verb.
package bundletest

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"io"
	"strings"
	"testing"

	"github.com/sharness-ai/sharness/host/bundle"
)

// Tampering is one way a bundle is changed after export: its name, the changed bundle, and what
// the error refusing it must name.
type Tampering struct {
	Name string
	Data []byte
	Want string
}

// Tamperings are the ways the bundle data, signed with opKey, is changed after export: each
// part's bytes, the manifest, a part added or removed, an entry that is not a regular file or
// leaves the bundle's folders, an entry twice, bytes that are no tar, and a manifest whose
// policy hash is not its policy files' (which Bundle.Policy refuses, not Read).
func Tamperings(t testing.TB, data []byte, opKey ed25519.PrivateKey) []Tampering {
	edit := func(path string, f func([]byte) []byte) []byte {
		es := tarEntries(t, data)
		for i := range es {
			if es[i].h.Name == path {
				es[i].data = f(bytes.Clone(es[i].data))
			}
		}
		return writeTar(es)
	}
	flip := func(b []byte) []byte { b[len(b)/2] ^= 1; return b }
	es := tarEntries(t, data)
	extra := append(tarEntries(t, data), tarEntry{&tar.Header{Name: "audit/evil.jsonl", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("{}\n")})
	link := append(tarEntries(t, data), tarEntry{&tar.Header{Name: "policy/layers/link.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, nil})
	escape := append(tarEntries(t, data), tarEntry{&tar.Header{Name: "policy/../../etc/cron.d/x", Typeflag: tar.TypeReg}, []byte("x")})
	dup := append(tarEntries(t, data), es[len(es)-1])
	var missing []tarEntry
	for _, e := range es {
		if e.h.Name != "secrets/anthropic-api-key.sealed" {
			missing = append(missing, e)
		}
	}
	// Consistent hashes, signed by the operator, but a policy that is not the manifest's hash.
	b, err := bundle.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string][]byte{}
	for _, e := range es {
		if e.h.Name != bundle.HeaderPath && e.h.Name != bundle.SigPath {
			parts[e.h.Name] = e.data
		}
	}
	lie := b.Header()
	lie.PolicyHash = "sha256:" + strings.Repeat("2", 64)
	lied, err := bundle.Marshal(lie, parts, opKey)
	if err != nil {
		t.Fatal(err)
	}
	return []Tampering{
		{"a layer changed", edit("policy/layers/L3-kms.yaml", flip), "part policy/layers/L3-kms.yaml"},
		{"the manifest changed", edit("policy/manifest.yaml", flip), "part policy/manifest.yaml"},
		{"a sealed secret changed", edit("secrets/anthropic-api-key.sealed", flip), "part secrets/anthropic-api-key.sealed"},
		{"an audit log changed", edit("audit/net.jsonl", flip), "part audit/net.jsonl"},
		{"the verification changed", edit("audit/verify.json", func(b []byte) []byte { return bytes.Replace(b, []byte(`"ok": true`), []byte(`"ok": false`), 1) }), "part audit/verify.json"},
		{"the bundle manifest changed", edit(bundle.HeaderPath, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"audit_ok": true`), []byte(`"audit_ok": false`), 1)
		}), "signature of sharness-export.json does not verify"},
		{"a part added", writeTar(extra), "part audit/evil.jsonl is not in the manifest"},
		{"a part removed", writeTar(missing), "part secrets/anthropic-api-key.sealed is listed but missing"},
		{"a symlink", writeTar(link), `"policy/layers/link.yaml" is not a regular file`},
		{"a path out", writeTar(escape), "is no part of an export bundle"},
		{"an entry twice", writeTar(dup), "appears twice"},
		{"not a tar", []byte("hello"), "not a readable tar file"},
		{"a policy hash that is not the files'", lied, "the bundle's policy files hash to"},
	}
}

// tarEntries reads a tar into its entries, in order.
func tarEntries(t testing.TB, data []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, tarEntry{h, b})
	}
}

type tarEntry struct {
	h    *tar.Header
	data []byte
}

func writeTar(entries []tarEntry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := *e.h
		h.Size = int64(len(e.data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		tw.WriteHeader(&h)
		tw.Write(e.data)
	}
	tw.Close()
	return b.Bytes()
}

// Part is the content of the bundle data's entry name, or nil.
func Part(t testing.TB, data []byte, name string) []byte {
	t.Helper()
	for _, e := range tarEntries(t, data) {
		if e.h.Name == name {
			return e.data
		}
	}
	return nil
}
