package cli

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
	"github.com/sharness-ai/sharness/policies/pbp"
)

// The export bundle (docs/exit.md): one uncompressed tar file, whose entries are regular files
// only: the bundle manifest sharness-export.json, its signature by the operator key
// sharness-export.sig, and the parts the manifest lists with their SHA-256 and size:
//
//	policy/manifest.yaml, policy/manifest.yaml.sig (if any), policy/<layer files>
//	secrets/<name>.sealed    re-sealed by kms to the person's recipient key
//	audit/<component>.jsonl  the audit logs as exported
//	audit/verify.json        their verification when exported
//
// It is uncompressed so that a search of its bytes for a secret means something, and a tar so
// that standard tools can list it. Nothing in it is secret in the clear: the secrets are HPKE
// ciphertexts only the recipient key opens.
const (
	exportKind       = "sharness.ai/export/v1"
	exportHeaderPath = "sharness-export.json"
	exportSigPath    = "sharness-export.sig"
	exportVerifyPath = "audit/verify.json"
	maxExport        = 512 << 20 // bytes of a bundle file
	maxExportPart    = 256 << 20 // bytes of one part (an audit log)
	maxExportParts   = 4096
	// exportSigContext separates the bundle's signature from every other use of the operator key.
	exportSigContext = "sharness-ai export v1\x00"
)

var (
	policyPart = regexp.MustCompile(`^policy/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
	auditPart  = regexp.MustCompile(`^audit/[a-z][a-z0-9-]{0,30}\.jsonl$`)
)

// exportPart is one part as the bundle manifest lists it.
type exportPart struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"` // hex
	Size   int64  `json:"size"`
}

// exportHeader is the bundle manifest, sharness-export.json.
type exportHeader struct {
	V          int          `json:"v"`
	Kind       string       `json:"kind"`
	Created    string       `json:"created"`     // RFC 3339, UTC
	Project    string       `json:"project"`     // the compose project exported
	PolicyHash string       `json:"policy_hash"` // M of policy/manifest.yaml and its layers
	KMS        string       `json:"kms"`         // fingerprint of the kms identity that re-sealed the secrets
	Recipient  string       `json:"recipient"`   // fingerprint of the recipient key they are sealed to
	Order      string       `json:"order"`       // the id of the operator's order kms carried out
	Secrets    []string     `json:"secrets"`     // the names under secrets/
	AuditOK    bool         `json:"audit_ok"`    // every audit log verified when exported
	Parts      []exportPart `json:"parts"`       // sorted by path
}

// exportSignature is sharness-export.sig: the operator key's Ed25519 signature over
// exportSigContext and the exact bytes of sharness-export.json.
type exportSignature struct {
	Key string `json:"key"` // ed25519:<base64>
	Sig string `json:"sig"` // standard base64
}

// exportBundle is a bundle read and checked by readExport, or being written.
type exportBundle struct {
	header   exportHeader
	operator ed25519.PublicKey
	parts    map[string][]byte // path → content
}

// validPart reports whether p is a path a bundle may hold.
func validPart(p string) bool {
	switch {
	case !fs.ValidPath(p):
		return false
	case policyPart.MatchString(p), auditPart.MatchString(p), p == exportVerifyPath:
		return true
	}
	name, ok := strings.CutPrefix(p, "secrets/")
	name, sealed := strings.CutSuffix(name, ".sealed")
	return ok && sealed && pbp.SecretName(name)
}

// marshalExport writes the bundle of parts, described by h (whose Parts are filled in here) and
// signed with key, as a tar file.
func marshalExport(h exportHeader, parts map[string][]byte, key ed25519.PrivateKey) ([]byte, error) {
	h.Parts = nil
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		if !validPart(p) {
			return nil, fmt.Errorf("export: %q is not a path a bundle may hold", p)
		}
		sum := sha256.Sum256(parts[p])
		h.Parts = append(h.Parts, exportPart{p, hex.EncodeToString(sum[:]), int64(len(parts[p]))})
	}
	head, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}
	head = append(head, '\n')
	sig, _ := json.Marshal(exportSignature{Key: pbp.PinString(key.Public().(ed25519.PublicKey)),
		Sig: seal.EncodeBase64(ed25519.Sign(key, append([]byte(exportSigContext), head...)))})
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
	if err := add(exportHeaderPath, head); err != nil {
		return nil, err
	}
	if err := add(exportSigPath, append(sig, '\n')); err != nil {
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

// readExport reads a bundle strictly: regular files only, each path one the format knows and
// present once, the manifest signed by the operator key it names, and every part listed in it
// with its size and SHA-256, and nothing else. An error names the part at fault.
func readExport(data []byte) (*exportBundle, error) {
	if len(data) > maxExport {
		return nil, fmt.Errorf("%d bytes, more than %d", len(data), maxExport)
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
		case name != exportHeaderPath && name != exportSigPath && !validPart(name):
			return nil, fmt.Errorf("entry %q is no part of an export bundle", name)
		case files[name] != nil:
			return nil, fmt.Errorf("entry %q appears twice", name)
		case len(files) >= maxExportParts+2:
			return nil, fmt.Errorf("more than %d parts", maxExportParts)
		case hdr.Size < 0 || hdr.Size > maxExportPart:
			return nil, fmt.Errorf("part %s: %d bytes, more than %d", name, hdr.Size, maxExportPart)
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
	head, sigData := files[exportHeaderPath], files[exportSigPath]
	if head == nil || sigData == nil {
		return nil, fmt.Errorf("no %s or no %s: not an export bundle", exportHeaderPath, exportSigPath)
	}
	delete(files, exportHeaderPath)
	delete(files, exportSigPath)
	b := &exportBundle{parts: files}
	var sig exportSignature
	if err := seal.DecodeStrict(bytes.TrimSpace(sigData), 1, &sig); err != nil {
		return nil, fmt.Errorf("%s: %w", exportSigPath, err)
	}
	var err error
	if b.operator, err = pbp.ParsePin(sig.Key); err != nil {
		return nil, fmt.Errorf("%s: key: %w", exportSigPath, err)
	}
	if raw, err := seal.DecodeBase64(sig.Sig); err != nil || !ed25519.Verify(b.operator, append([]byte(exportSigContext), head...), raw) {
		return nil, fmt.Errorf("%s: the signature of %s does not verify with the key it names (%s): the manifest was changed", exportSigPath, exportHeaderPath, sig.Key)
	}
	if err := seal.DecodeStrict(head, 3, &b.header); err != nil {
		return nil, fmt.Errorf("%s: %w", exportHeaderPath, err)
	}
	h := &b.header
	switch {
	case h.V != 1 || h.Kind != exportKind:
		return nil, fmt.Errorf("%s: version %d kind %q, want 1 and %s", exportHeaderPath, h.V, h.Kind, exportKind)
	case pbp.CheckHash(h.PolicyHash) != nil:
		return nil, fmt.Errorf("%s: policy_hash %q is not sha256:<hex>", exportHeaderPath, h.PolicyHash)
	}
	if _, err := time.Parse(time.RFC3339, h.Created); err != nil {
		return nil, fmt.Errorf("%s: created: %w", exportHeaderPath, err)
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
		return nil, fmt.Errorf("%s: secrets %v, the bundle holds %v", exportHeaderPath, h.Secrets, names)
	}
	return b, nil
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

// writeNew writes data to the file path all at once (a temporary file, fsync, then a hard link,
// which fails if path exists), refusing to replace anything.
func writeNew(path string, data []byte, perm os.FileMode) error {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer root.Close()
	return writeNewIn(root, filepath.Base(path), data, perm)
}

// writeNewIn is writeNew of name under root, making its folders.
func writeNewIn(root *os.Root, name string, data []byte, perm os.FileMode) error {
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	if err := artefact.WriteIn(root, name, data, perm, true); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
