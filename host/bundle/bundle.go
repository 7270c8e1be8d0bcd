// Package bundle is the export bundle (docs/exit.md): one uncompressed tar file, whose entries
// are regular files only: the bundle manifest sharness-export.json, its signature by the operator
// key sharness-export.sig, and the parts the manifest lists with their SHA-256 and size:
//
//	policy/manifest.yaml, policy/manifest.yaml.sig (if any), policy/<layer files>
//	secrets/<name>.sealed    re-sealed by kms to the person's recipient key
//	audit/<component>.jsonl  the audit logs as exported
//	audit/verify.json        their verification when exported
//
// It is uncompressed so that a search of its bytes for a secret means something, and a tar so
// that standard tools can list it. Nothing in it is secret in the clear: the secrets are HPKE
// ciphertexts only the recipient key opens. Marshal writes one; Read reads one strictly, as a
// file the person may have received from elsewhere; Restore writes its files into a folder.
//
// What it does not guarantee: a bundle that reads is signed by the operator key it names, which
// anyone can make: only a key the person pins (import --operator-pubkey) says whose it is. Read
// checks each part's hash, not what a part says: the policy's hash is recomputed by Policy, the
// sealed secrets are checked by Sealed, and audit/verify.json is export's verdict, not verified
// again here.
package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"
	"time"

	"github.com/sharness-ai/sharness/internal/artefact"
	"github.com/sharness-ai/sharness/internal/seal"
	"github.com/sharness-ai/sharness/policies/keys"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// The format's names and limits.
const (
	Kind       = "sharness.ai/export/v1"
	HeaderPath = "sharness-export.json"
	SigPath    = "sharness-export.sig"
	VerifyPath = "audit/verify.json"
	MaxSize    = 512 << 20 // bytes of a bundle file
	maxPart    = 256 << 20 // bytes of one part (an audit log)
	maxParts   = 4096
	// sigContext separates the bundle's signature from every other use of the operator key.
	sigContext = "sharness-ai export v1\x00"
)

var policyPart = regexp.MustCompile(`^policy/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

// Part is one part as the bundle manifest lists it.
type Part struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"` // hex
	Size   int64  `json:"size"`
}

// Header is the bundle manifest, sharness-export.json.
type Header struct {
	V          int      `json:"v"`
	Kind       string   `json:"kind"`
	Created    string   `json:"created"`     // RFC 3339, UTC
	Project    string   `json:"project"`     // the compose project exported
	PolicyHash string   `json:"policy_hash"` // M of policy/manifest.yaml and its layers
	KMS        string   `json:"kms"`         // fingerprint of the kms identity that re-sealed the secrets
	Recipient  string   `json:"recipient"`   // fingerprint of the recipient key they are sealed to
	Order      string   `json:"order"`       // the id of the operator's order kms carried out
	Secrets    []string `json:"secrets"`     // the names under secrets/
	AuditOK    bool     `json:"audit_ok"`    // every audit log verified when exported
	Parts      []Part   `json:"parts"`       // sorted by path
}

// signature is sharness-export.sig: the operator key's Ed25519 signature over sigContext and
// the exact bytes of sharness-export.json.
type signature struct {
	Key string `json:"key"` // ed25519:<base64>
	Sig string `json:"sig"` // standard base64
}

// Bundle is a bundle Read has checked.
type Bundle struct {
	header   Header
	operator ed25519.PublicKey
	parts    map[string][]byte // path → content
}

// Header is the bundle's manifest.
func (b *Bundle) Header() Header { return b.header }

// Operator is the key that signed the bundle's manifest.
func (b *Bundle) Operator() ed25519.PublicKey { return b.operator }

// AuditLogs is how many audit logs the bundle holds.
func (b *Bundle) AuditLogs() int {
	n := 0
	for p := range b.parts {
		if isAuditPart(p) {
			n++
		}
	}
	return n
}

// isAuditPart reports whether p is audit/<component>.jsonl, under pbp's rule for component names.
func isAuditPart(p string) bool {
	name, ok := strings.CutPrefix(p, "audit/")
	name, jsonl := strings.CutSuffix(name, ".jsonl")
	return ok && jsonl && pbp.ValidComponentName(name)
}

// validPart reports whether p is a path a bundle may hold.
func validPart(p string) bool {
	switch {
	case !fs.ValidPath(p):
		return false
	case policyPart.MatchString(p), isAuditPart(p), p == VerifyPath:
		return true
	}
	name, ok := strings.CutPrefix(p, "secrets/")
	name, sealed := strings.CutSuffix(name, ".sealed")
	return ok && sealed && pbp.SecretName(name)
}

// Marshal writes the bundle of parts, described by h (whose Parts are filled in here) and signed
// with key, as a tar file.
func Marshal(h Header, parts map[string][]byte, key ed25519.PrivateKey) ([]byte, error) {
	h.Parts = nil
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		if !validPart(p) {
			return nil, fmt.Errorf("export: %q is not a path a bundle may hold", p)
		}
		sum := sha256.Sum256(parts[p])
		h.Parts = append(h.Parts, Part{p, hex.EncodeToString(sum[:]), int64(len(parts[p]))})
	}
	head, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}
	head = append(head, '\n')
	sig, _ := json.Marshal(signature{Key: keys.Pin(key.Public().(ed25519.PublicKey)),
		Sig: seal.EncodeBase64(ed25519.Sign(key, append([]byte(sigContext), head...)))})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	created, _ := time.Parse(time.RFC3339, h.Created)
	add := func(name string, data []byte) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: created, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add(HeaderPath, head); err != nil {
		return nil, err
	}
	if err := add(SigPath, append(sig, '\n')); err != nil {
		return nil, err
	}
	for _, p := range h.Parts {
		if err := add(p.Path, parts[p.Path]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Read reads a bundle strictly: regular files only, each path one the format knows and
// present once, the manifest signed by the operator key it names, and every part listed in it
// with its size and SHA-256, and nothing else. An error names the part at fault.
func Read(data []byte) (*Bundle, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), MaxSize)
	}
	files := map[string][]byte{}
	var total int64 // bytes of content so far
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a readable tar file: %w", err)
		}
		name := hdr.Name
		switch {
		case hdr.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("entry %q is not a regular file", name)
		case name != HeaderPath && name != SigPath && !validPart(name):
			return nil, fmt.Errorf("entry %q is no part of an export bundle", name)
		case files[name] != nil:
			return nil, fmt.Errorf("entry %q appears twice", name)
		case len(files) >= maxParts+2:
			return nil, fmt.Errorf("more than %d parts", maxParts)
		case hdr.Size < 0 || hdr.Size > maxPart:
			return nil, fmt.Errorf("part %s: %d bytes, more than %d", name, hdr.Size, maxPart)
		case hdr.Size > int64(len(data))-total:
			// More content than the file holds: a sparse entry, whose holes read as zeros.
			return nil, fmt.Errorf("part %s: %d bytes, more than the file holds", name, hdr.Size)
		}
		total += hdr.Size
		content, err := io.ReadAll(io.LimitReader(tr, hdr.Size)) // no allocation on the header's word
		if err == nil && int64(len(content)) != hdr.Size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, fmt.Errorf("part %s: %w", name, err)
		}
		files[name] = content
	}
	head, sigData := files[HeaderPath], files[SigPath]
	if head == nil || sigData == nil {
		return nil, fmt.Errorf("no %s or no %s: not an export bundle", HeaderPath, SigPath)
	}
	delete(files, HeaderPath)
	delete(files, SigPath)
	b := &Bundle{parts: files}
	var sig signature
	if err := seal.DecodeStrict(bytes.TrimSpace(sigData), 1, &sig); err != nil {
		return nil, fmt.Errorf("%s: %w", SigPath, err)
	}
	var err error
	if b.operator, err = keys.ParsePin(sig.Key); err != nil {
		return nil, fmt.Errorf("%s: key: %w", SigPath, err)
	}
	if raw, err := seal.DecodeBase64(sig.Sig); err != nil || !ed25519.Verify(b.operator, append([]byte(sigContext), head...), raw) {
		return nil, fmt.Errorf("%s: the signature of %s does not verify with the key it names (%s): the manifest was changed", SigPath, HeaderPath, sig.Key)
	}
	if err := seal.DecodeStrict(head, 3, &b.header); err != nil {
		return nil, fmt.Errorf("%s: %w", HeaderPath, err)
	}
	h := &b.header
	switch {
	case h.V != 1 || h.Kind != Kind:
		return nil, fmt.Errorf("%s: version %d kind %q, want 1 and %s", HeaderPath, h.V, h.Kind, Kind)
	case keys.CheckHash(h.PolicyHash) != nil:
		return nil, fmt.Errorf("%s: policy_hash %q is not sha256:<hex>", HeaderPath, h.PolicyHash)
	}
	if _, err := time.Parse(time.RFC3339, h.Created); err != nil {
		return nil, fmt.Errorf("%s: created: %w", HeaderPath, err)
	}
	listed := map[string]bool{}
	for _, p := range h.Parts {
		content, ok := files[p.Path]
		sum := sha256.Sum256(content)
		switch {
		case listed[p.Path]:
			return nil, fmt.Errorf("part %s is listed twice", p.Path)
		case !ok:
			return nil, fmt.Errorf("part %s is listed but missing", p.Path)
		case int64(len(content)) != p.Size || hex.EncodeToString(sum[:]) != p.SHA256:
			return nil, fmt.Errorf("part %s: %d bytes of sha256 %x, the manifest lists %d bytes of sha256 %s: it was changed", p.Path, len(content), sum, p.Size, p.SHA256)
		}
		listed[p.Path] = true
	}
	for p := range files {
		if !listed[p] {
			return nil, fmt.Errorf("part %s is not in the manifest: it was added", p)
		}
	}
	var names []string
	for p := range files {
		if n, ok := strings.CutPrefix(p, "secrets/"); ok {
			names = append(names, strings.TrimSuffix(n, ".sealed"))
		}
	}
	if slices.Sort(names); !slices.Equal(names, h.Secrets) {
		return nil, fmt.Errorf("%s: secrets %v, the bundle holds %v", HeaderPath, h.Secrets, names)
	}
	return b, nil
}

// ReadFile reads the bundle file at path with Read. A bundle that does not read is refused.
func ReadFile(path string) (*Bundle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	b, err := Read(data)
	if err != nil {
		return nil, refused{fmt.Errorf("%s: %w", path, err)}
	}
	return b, nil
}

// PolicyParts reads the manifest at the path manifest, its signature if any, and its layers, as
// the parts policy/..., and checks they are the policy m (its hash computed from these very
// bytes): what export puts in a bundle.
func PolicyParts(manifest string, m *pbp.Manifest) (map[string][]byte, error) {
	root, err := os.OpenRoot(filepath.Dir(manifest))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	name := filepath.Base(manifest)
	parts := map[string][]byte{}
	files := map[string]string{"manifest.yaml": name, "manifest.yaml.sig": name + ".sig"}
	for _, l := range m.Layers {
		files[l.File] = l.File
	}
	for part, file := range files {
		data, err := root.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) && part == "manifest.yaml.sig" {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("read the policy: %w", err)
		}
		parts["policy/"+part] = data
	}
	if got, err := policyOf(parts); err != nil || got.Hash != m.Hash {
		return nil, fmt.Errorf("the policy files changed while read (%v): try again", err)
	}
	return parts, nil
}

// Policy loads the policy the bundle holds and refuses it unless its hash, computed from the
// bytes of its files, is the one the bundle's manifest names.
func (b *Bundle) Policy() (*pbp.Manifest, error) {
	m, err := policyOf(b.parts)
	if err != nil {
		return nil, refused{fmt.Errorf("the bundle's policy: %w", err)}
	}
	if m.Hash != b.header.PolicyHash {
		return nil, refused{fmt.Errorf("the bundle's policy files hash to %s, its manifest says %s", m.Hash, b.header.PolicyHash)}
	}
	return m, nil
}

// policyOf loads the policy the parts under policy/ hold, so that its hash is computed from
// exactly the bytes in hand.
func policyOf(parts map[string][]byte) (*pbp.Manifest, error) {
	fsys := fstest.MapFS{} // an in-memory file system; pbp reads through fs.FS alone
	for p, data := range parts {
		if rel, ok := strings.CutPrefix(p, "policy/"); ok {
			fsys[rel] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
	}
	if fsys["manifest.yaml"] == nil {
		return nil, errors.New("no policy/manifest.yaml")
	}
	return pbp.Load(fsys, "manifest.yaml")
}

// Sealed parses the bundle's sealed secrets, and refuses them unless each is addressed to the
// recipient key of fingerprint to.
func (b *Bundle) Sealed(to string) ([]*seal.Sealed, error) {
	var out []*seal.Sealed
	for _, name := range b.header.Secrets {
		s, err := seal.ParseSealed(b.parts["secrets/"+name+".sealed"])
		switch {
		case err != nil:
			return nil, refused{fmt.Errorf("part secrets/%s.sealed: %w", name, err)}
		case s.Name() != name:
			return nil, refused{fmt.Errorf("part secrets/%s.sealed holds secret %q", name, s.Name())}
		case s.To() != to:
			return nil, refused{fmt.Errorf("secret %s is sealed to %s, the recipient key is %s", name, s.To(), to)}
		}
		out = append(out, s)
	}
	return out, nil
}

// Restore writes the bundle's files into dir: the policy at its top, the audit logs and their
// verification under audit-archive/, the sealed secrets under sealed/, and the bundle manifest as
// export.json. It refuses to replace any file, before writing any.
func (b *Bundle) Restore(dir string) error {
	files := map[string][]byte{}
	for p, data := range b.parts {
		switch {
		case strings.HasPrefix(p, "policy/"):
			files[strings.TrimPrefix(p, "policy/")] = data
		case strings.HasPrefix(p, "audit/"):
			files["audit-archive/"+strings.TrimPrefix(p, "audit/")] = data
		case strings.HasPrefix(p, "secrets/"):
			files["sealed/"+strings.TrimPrefix(p, "secrets/")] = data
		}
	}
	files["export.json"], _ = json.MarshalIndent(b.header, "", "  ")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	names := slices.Sorted(maps.Keys(files))
	for _, n := range names {
		if _, err := root.Lstat(n); err == nil {
			return refused{fmt.Errorf("%s exists: refusing to overwrite it (import into an empty folder)", filepath.Join(dir, n))}
		}
	}
	for _, n := range names {
		if err := writeNewIn(root, n, files[n], 0o644); err != nil {
			return fmt.Errorf("restore into %s: %w", dir, err)
		}
	}
	return nil
}

// WriteNew writes data to the file path all at once (a temporary file, fsync, then a hard link,
// which fails if path exists), refusing to replace anything: how a bundle, and the recipient key
// an export seals to, are written.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return writeNewIn(root, filepath.Base(path), data, perm)
}

// writeNewIn is WriteNew of name under root, making its folders.
func writeNewIn(root *os.Root, name string, data []byte, perm os.FileMode) error {
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	if err := artefact.WriteIn(root, name, data, perm, true); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// refused marks an error as a failed check (sharness-ai exits 1) rather than bad input (2).
type refused struct{ error }

func (r refused) Unwrap() error { return r.error }

// Refused says the error is a failed check.
func (refused) Refused() bool { return true }
