// Package guard is the fs component's judgement and hands: it decides whether a write, delete
// or rename of a protected workspace path may happen (pure functions over Rules), and carries it
// out relative to a workspace directory descriptor without ever following a symbolic link or
// leaving the workspace (openat2 with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS
// and RESOLVE_NO_XDEV on every component). The agent sees the protected paths read-only (each is
// bound read-only over its read-write workspace); fs is their only writer, and Prepare makes them
// exist before the stack starts so that those binds have something to bind.
//
// A protected path ending in "/" is a folder whose entries fs may write, delete and rename; any
// other protected path is a single file, rewritten in place and never replaced, deleted or renamed
// (it is a single-file bind mount in the agent's container; see rewrite).
//
// A change to a path the policy lists under ask happens only through Apply, and only after an
// Approver (the approval gate, internal/gate) approved exactly that change: its canonical bytes
// bind the operation, the paths, and the bytes written or moved with their size and mode (a
// delete binds its path: what lies under an ask path changes only with approval). The
// gate is asked only about a change that passed every other rule, and every rule is checked again
// when the approved change is carried out; an approval waives the ask rule and nothing else.
//
// What it does not guarantee: a reader of a protected root file (.envrc) while fs rewrites it may
// see a mix of old and new bytes, since the rewrite is in place; a crash during a rewrite can leave
// a half-written root file, and a crash during an atomic replace a ".sharness-fs-*.tmp" file
// behind. The secret filter finds formats, not secrets (internal/secretfilter). Paths are compared
// byte for byte: a case-folding (casefold ext4, a macOS host) or Unicode-normalising file system
// under the workspace could make two spellings one file, which fs does not detect. The checks see
// the workspace as fs's own mount namespace shows it; other writers there (the person on the host)
// are trusted. The approval gate is not a rate limit: the agent can ask as often as it likes, and
// each request waits for a person or times out. A summary shows only the end of a long path.
package guard

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sharness-ai/sharness/internal/secretfilter"
)

// Reason is a refusal's stable code: the agent sees it, the e2e suite matches it. How fs answers
// each is in its table (refusals.go).
type Reason string

const (
	ReasonBadJSON       Reason = "invalid_json"      // a body that is not one strict JSON object (images/fs decodes)
	ReasonBadField      Reason = "invalid_field"     // a field missing, unknown, or of the wrong type
	ReasonBadPath       Reason = "bad_path"          // not a clean relative path (.., absolute, NUL, empty component, ...)
	ReasonNotProtected  Reason = "not_protected"     // the agent may write it directly
	ReasonProtectedRoot Reason = "protected_root"    // delete, rename or replace a protected path itself
	ReasonApproval      Reason = "approval_required" // business.fs.ask, and nobody was asked (Apply without an Approver)
	ReasonTooLarge      Reason = "too_large"         // above business.fs.max_file_size
	ReasonMode          Reason = "mode"              // a mode fs will not set
	ReasonSecret        Reason = "secret"            // the secret filter found one
	ReasonSymlink       Reason = "symlink"           // a symbolic link somewhere in the path
	ReasonMount         Reason = "mount_point"       // the path crosses into another mount
	ReasonWrongType     Reason = "wrong_type"        // a file where a folder is expected, or the reverse
	ReasonNotFound      Reason = "not_found"
	ReasonExists        Reason = "exists"            // rename never replaces
	ReasonNotEmpty      Reason = "not_empty"         // folders are deleted only when empty
	ReasonTooMany       Reason = "too_many_entries"  // the protected folders hold MaxEntries already
	ReasonIO            Reason = "io_error"          // the cause is in the log, not the message
	ReasonAudit         Reason = "audit_unavailable" // fs's audit log takes no more lines (images/fs refuses)
)

// Refusal is a decision against a request. Message is for the agent and never holds content;
// the cause, if any, is for the log (Unwrap).
type Refusal struct {
	Reason  Reason
	Message string
	cause   error
}

func (r *Refusal) Error() string { return "fs: " + r.Message }
func (r *Refusal) Unwrap() error { return r.cause }

func refuse(reason Reason, format string, a ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, a...)}
}

// Limits on a path the agent gives: Linux's NAME_MAX per component, and far below PATH_MAX.
const (
	MaxPathLen = 1024
	MaxDepth   = 32
	maxName    = 255
)

// Defaults when the policy leaves a limit unset.
const (
	DefaultMaxFileSize = 1 << 20
	DefaultMaxEntries  = 1000
)

// Policy is what Compile reads, from the component's effective policy.
type Policy struct {
	Protected   []string // a trailing "/" marks a folder
	Ask         []string // protected paths, or folders ending in "/", whose changes need approval
	MaxFileSize int64    // bytes; 0 is DefaultMaxFileSize
	ExecBits    bool     // false: x bits are stripped from every mode fs sets
	MaxEntries  int      // entries under all protected folders together; 0 is DefaultMaxEntries
}

// Rules are a compiled Policy. The zero value protects nothing, so it refuses every path.
type Rules struct {
	files, dirs       []string // protected root files; protected folders without their "/"
	askFiles, askDirs []string
	maxSize           int64
	execBits          bool
	maxEntries        int
}

// Compile checks p: every path must be a clean relative path, and every ask path must be
// protected (an ask path fs could not write would be a policy that says nothing).
func Compile(p Policy) (*Rules, error) {
	r := &Rules{maxSize: p.MaxFileSize, execBits: p.ExecBits, maxEntries: p.MaxEntries}
	if r.maxSize == 0 {
		r.maxSize = DefaultMaxFileSize
	}
	if r.maxEntries == 0 {
		r.maxEntries = DefaultMaxEntries
	}
	if r.maxSize < 0 || r.maxEntries < 0 {
		return nil, fmt.Errorf("compile fs rules: negative limit")
	}
	for _, e := range p.Protected {
		rel, dir, ref := Clean(e)
		if ref != nil {
			return nil, fmt.Errorf("compile fs rules: protected path %q: %s", e, ref.Message)
		}
		if dir {
			r.dirs = append(r.dirs, rel)
		} else {
			r.files = append(r.files, rel)
		}
	}
	for _, e := range p.Ask {
		rel, dir, ref := Clean(e)
		if ref != nil {
			return nil, fmt.Errorf("compile fs rules: ask path %q: %s", e, ref.Message)
		}
		if t, ref := r.Resolve(rel); ref != nil || t.isRoot && dir != t.dir {
			return nil, fmt.Errorf("compile fs rules: ask path %q is not a protected path", e)
		}
		if dir {
			r.askDirs = append(r.askDirs, rel)
		} else {
			r.askFiles = append(r.askFiles, rel)
		}
	}
	return r, nil
}

// MaxFileSize is the largest content fs writes, in bytes.
func (r *Rules) MaxFileSize() int64 { return r.maxSize }

// Target is a path Resolve accepted: clean, relative, and a protected path or inside a protected
// folder.
type Target struct {
	Path   string // clean, without a trailing "/"
	root   string // the protected path it is or lies under
	isRoot bool   // Path is the protected path itself
	dir    bool   // root is a folder
	ask    bool   // Path is an ask path, lies under one, or holds one
	holds  string // a protected path under Path, if any
}

// Clean refuses any path but a clean relative one, in valid UTF-8, without NUL or other control
// characters, "." or ".." components, empty components, or more than MaxDepth components, and
// returns it without its trailing "/", which only says that it names a folder.
func Clean(p string) (rel string, dir bool, ref *Refusal) {
	switch {
	case p == "":
		return "", false, refuse(ReasonBadPath, "the path is empty")
	case len(p) > MaxPathLen:
		return "", false, refuse(ReasonBadPath, "the path is longer than %d bytes", MaxPathLen)
	case !utf8.ValidString(p):
		return "", false, refuse(ReasonBadPath, "the path is not valid UTF-8")
	case strings.ContainsFunc(p, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		return "", false, refuse(ReasonBadPath, "the path holds a NUL or another control character")
	case strings.HasPrefix(p, "/"):
		return "", false, refuse(ReasonBadPath, "%q is absolute: give a path relative to the workspace", p)
	}
	rel, dir = strings.CutSuffix(p, "/")
	parts := strings.Split(rel, "/")
	if len(parts) > MaxDepth {
		return "", false, refuse(ReasonBadPath, "%q has more than %d components", p, MaxDepth)
	}
	for _, c := range parts {
		switch {
		case c == "" || c == ".":
			return "", false, refuse(ReasonBadPath, "%q is not clean (an empty or \".\" component)", p)
		case c == "..":
			return "", false, refuse(ReasonBadPath, "%q has a \"..\" component", p)
		case len(c) > maxName:
			return "", false, refuse(ReasonBadPath, "%q has a component longer than %d bytes", p, maxName)
		}
	}
	return rel, dir, nil
}

// Resolve decides which protected path p is or lies under; a path that is neither is the agent's
// to write directly.
func (r *Rules) Resolve(p string) (Target, *Refusal) {
	rel, _, ref := Clean(p)
	if ref != nil {
		return Target{}, ref
	}
	t := Target{Path: rel}
	for _, a := range slices.Concat(r.askFiles, r.askDirs) {
		t.ask = t.ask || rel == a || strings.HasPrefix(a, rel+"/") || slices.Contains(r.askDirs, a) && strings.HasPrefix(rel, a+"/")
	}
	for _, p := range slices.Concat(r.files, r.dirs) {
		if strings.HasPrefix(p, rel+"/") {
			t.holds = p
		}
	}
	switch {
	case slices.Contains(r.files, rel):
		t.root, t.isRoot = rel, true
	case slices.Contains(r.dirs, rel):
		t.root, t.isRoot, t.dir = rel, true, true
	default:
		for _, d := range r.dirs {
			if strings.HasPrefix(rel, d+"/") && len(d) > len(t.root) {
				t.root, t.dir = d, true
			}
		}
	}
	if t.root == "" {
		return Target{}, refuse(ReasonNotProtected, "%q is not a protected path: write it directly in /workspace", rel)
	}
	return t, nil
}

// Scanner finds secrets; *secretfilter.Filter is one.
type Scanner interface {
	Scan(text []byte) []secretfilter.Hit
}

var octalMode = regexp.MustCompile(`^0?[0-7]{3}$`)

// checkWrite decides a write of content to p with mode, an octal string ("0644") or "" to keep
// the existing file's mode (0644 for a new file). It returns the mode asked for, 0 when none. It
// leaves the ask rule to the caller (write, granted), which comes last: approval_required means
// that every other rule passed.
func (r *Rules) checkWrite(p string, content []byte, mode string, s Scanner) (Target, uint32, *Refusal) {
	t, ref := r.Resolve(p)
	switch {
	case ref != nil:
		return Target{}, 0, ref
	case strings.HasSuffix(p, "/"):
		return Target{}, 0, refuse(ReasonWrongType, "%q ends in \"/\": a write names a file", p)
	case t.isRoot && t.dir:
		return Target{}, 0, refuse(ReasonWrongType, "%q is a protected folder: write files inside it", t.Path)
	}
	var perm uint32
	if mode != "" {
		if !octalMode.MatchString(mode) {
			return Target{}, 0, refuse(ReasonMode, "mode %q must be three or four octal digits without setuid, setgid or sticky bits, such as \"0644\"", mode)
		}
		fmt.Sscanf(mode, "%o", &perm)
		if perm&0o600 != 0o600 {
			return Target{}, 0, refuse(ReasonMode, "mode %q must let the owner read and write (fs writes the file again later)", mode)
		}
	}
	return t, perm, r.CheckContent(t.Path, content, s)
}

// CheckContent applies the size cap and the secret filter to what would be at p.
func (r *Rules) CheckContent(p string, content []byte, s Scanner) *Refusal {
	if int64(len(content)) > r.maxSize {
		return refuse(ReasonTooLarge, "%q would be %d bytes; business.fs.max_file_size is %d", p, len(content), r.maxSize)
	}
	var rules []string
	for _, h := range s.Scan(content) {
		if !slices.Contains(rules, h.Rule) {
			rules = append(rules, h.Rule)
		}
	}
	if len(rules) > 0 {
		return refuse(ReasonSecret, "the content for %q matches secret filter rule %s; fs does not write secrets into protected paths", p, strings.Join(rules, ", "))
	}
	return nil
}

// Mode is the mode fs sets: the one asked for, else the existing file's, else 0644, without its
// x bits unless business.fs.exec_bits allows them; stripped says they were removed.
func (r *Rules) Mode(asked uint32, existing uint32, exists bool) (mode uint32, stripped bool) {
	mode = asked
	switch {
	case mode == 0 && exists:
		mode = existing & 0o777
	case mode == 0:
		mode = 0o644
	}
	if !r.execBits && mode&0o111 != 0 {
		return mode &^ 0o111, true
	}
	return mode, false
}

// checkDelete decides a delete of p: an entry inside a protected folder, never a protected path
// itself nor a folder holding one (they are mount points in the agent's container). It leaves
// the ask rule, on an ask path or a folder holding one, to the caller (remove, granted).
func (r *Rules) checkDelete(p string) (Target, *Refusal) {
	t, ref := r.Resolve(p)
	switch {
	case ref != nil:
		return Target{}, ref
	case t.isRoot:
		return Target{}, refuse(ReasonProtectedRoot, "%q is a protected path itself (a mount point for the agent); only entries inside a protected folder may be deleted or renamed", t.Path)
	case t.holds != "":
		return Target{}, refuse(ReasonProtectedRoot, "%q holds the protected path %q", t.Path, t.holds)
	}
	return t, nil
}

// checkRename decides a rename of from to to: both must be deletable (checkDelete), and to must
// not be from or inside it. The content rules are for the caller, which reads the file; so is
// the ask rule, on either path (rename, askPath), which comes last.
func (r *Rules) checkRename(from, to string) (Target, Target, *Refusal) {
	f, ref := r.checkDelete(from)
	if ref != nil {
		return Target{}, Target{}, ref
	}
	t, ref := r.checkDelete(to)
	switch {
	case ref != nil:
		return Target{}, Target{}, ref
	case t.Path == f.Path || strings.HasPrefix(t.Path, f.Path+"/"):
		return Target{}, Target{}, refuse(ReasonBadPath, "cannot rename %q to itself or into itself", f.Path)
	}
	return f, t, nil
}

// askPath is the first of ts that needs approval, "" if none does.
func askPath(ts ...Target) string {
	for _, t := range ts {
		if t.ask {
			return t.Path
		}
	}
	return ""
}

func approval(p string) *Refusal {
	return refuse(ReasonApproval, "%q needs a person's approval (business.fs.ask), and none was asked for", p)
}

// depth is the number of components of a clean relative path.
func depth(rel string) int { return strings.Count(rel, "/") + 1 }

// split returns a clean relative path's parent ("" for the workspace) and last component.
func split(rel string) (string, string) {
	dir, name := path.Split(rel)
	return strings.TrimSuffix(dir, "/"), name
}
