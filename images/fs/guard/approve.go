package guard

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/sharness-ai/sharness/internal/gate"
)

// Reasons of a change put to the approval gate: its verdicts as fs passes them on (docs/gate.md
// lists them all; the others, such as approval_bad_signature, pass through unchanged).
const (
	ReasonDenied      = Reason(gate.ReasonDenied)      // the operator denied it
	ReasonTimeout     = Reason(gate.ReasonTimeout)     // no decision before the request expired, or the caller left
	ReasonMismatch    = Reason(gate.ReasonMismatch)    // the approval is for another change, or the file a rename moves changed since
	ReasonUnavailable = Reason(gate.ReasonUnavailable) // fs has no gate (no operator key or gate folder), or the gate failed
)

// The kinds of change; the gate's action is "fs." and the kind.
const (
	OpWrite  = "write"
	OpDelete = "delete"
	OpRename = "rename"
)

// Change is one change of the protected paths, as the agent asked for it.
type Change struct {
	Op      string // OpWrite, OpDelete or OpRename
	Path    string // what is written or deleted; what a rename moves
	To      string // where a rename moves it
	Content []byte // what a write writes
	Mode    string // a write's mode: an octal string, or "" (checkWrite)
}

// Approval is an Approver's answer. The zero value refuses.
type Approval struct {
	OK     bool
	Reason Reason // the gate's reason: approved, approval_denied, approval_timeout, ...
}

// Approver asks a person about a change to an ask path: action is "fs.write", "fs.delete" or
// "fs.rename", canonical the exact change (what an approval binds), summary a short text for the
// person that never holds content. It blocks until a decision, or until ctx ends. The error
// names the cause of a refusal, for the log.
type Approver interface {
	Approve(ctx context.Context, action string, canonical []byte, summary string) (Approval, error)
}

// Apply carries out c (write, remove or rename), putting a change to an ask path to a first and
// blocking until the operator decides or ctx ends. It asks only once every other rule has
// passed (approval_required says so; the file a rename moves is read and checked too), and it
// carries the change out only if it is still exactly the change approved, checking every rule
// again then: an approval waives the ask rule for this one change, and no other rule. Without a,
// such a change is refused with approval_required. The Result names the approval and the digest
// it bound, also when the change is refused.
func (g *Guard) Apply(ctx context.Context, c Change, a Approver) (Result, error) {
	res, err := g.apply(c, nil)
	var ref *Refusal
	if a == nil || !errors.As(err, &ref) || ref.Reason != ReasonApproval {
		return res, err
	}
	canonical, f, err := g.bind(c)
	if err != nil {
		return Result{}, err
	}
	sum := sha256.Sum256(canonical)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	v, err := a.Approve(ctx, "fs."+c.Op, canonical, c.summary(f))
	if !v.OK || err != nil {
		r := v.Reason
		if v.OK || r == "" {
			r = ReasonUnavailable
		}
		return Result{Approval: r, Digest: digest}, notApproved(c, r, err)
	}
	res, err = g.apply(c, canonical)
	res.Approval, res.Digest = cmp.Or(v.Reason, Reason(gate.ReasonApproved)), digest
	return res, err
}

// apply carries out c; a change to an ask path only if approved holds its canonical bytes.
func (g *Guard) apply(c Change, approved []byte) (Result, error) {
	switch c.Op {
	case OpWrite:
		return g.write(c, approved)
	case OpDelete:
		return g.remove(c, approved)
	case OpRename:
		return g.rename(c, approved)
	}
	return Result{}, refuse(ReasonIO, "fs makes no change %q", c.Op)
}

// bind returns the canonical bytes of c, a change that passed every rule but ask, and the file
// they describe: a write's content, or the file a rename moves, read now. What a delete or a
// rename names must exist, so that nobody is asked about nothing. A folder is not moved: its
// entries may change while the person decides, and an approval could not bind them.
func (g *Guard) bind(c Change) ([]byte, file, error) {
	if c.Op == OpWrite {
		f := fileOf(c.Content, c.Mode)
		return c.canonical(f), f, nil
	}
	p, _, _ := Clean(c.Path)
	g.mu.Lock()
	defer g.mu.Unlock()
	dir, name, st, err := g.entry(p)
	if err != nil {
		return nil, file{}, err
	}
	defer unix.Close(dir)
	switch {
	case c.Op == OpDelete:
		return c.canonical(file{}), file{}, nil
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, file{}, movesFolder(p)
	}
	fd, content, err := g.source(dir, name, p)
	if err != nil {
		return nil, file{}, err
	}
	unix.Close(fd)
	if ref := g.rules.CheckContent(c.To, content, g.scan); ref != nil {
		return nil, file{}, ref
	}
	f := sourceFile(content, st.Mode)
	return c.canonical(f), f, nil
}

// file is what an approval binds of a file: a write's content, or the file a rename moves.
type file struct {
	size   int64
	sha256 string // hex
	mode   string // a write's mode as asked ("" keeps the file's); a moved file's, four octal digits
}

func fileOf(content []byte, mode string) file {
	sum := sha256.Sum256(content)
	return file{int64(len(content)), hex.EncodeToString(sum[:]), mode}
}

func sourceFile(content []byte, mode uint32) file {
	return fileOf(content, fmt.Sprintf("%04o", mode&0o7777))
}

// canonical is the exact change as an approval binds it, f being the file written or moved: JSON
// with fixed keys in a fixed order (encoding/json of a struct). The paths are as the agent gave
// them, valid UTF-8 (Clean refused any other before), so encoding/json changes none of them.
func (c Change) canonical(f file) []byte {
	b, _ := json.Marshal(struct {
		V      int    `json:"v"`
		Op     string `json:"op"`
		Path   string `json:"path"`
		To     string `json:"to,omitempty"`
		Size   int64  `json:"size,omitempty"`
		SHA256 string `json:"sha256,omitempty"`
		Mode   string `json:"mode,omitempty"`
	}{1, c.Op, c.Path, c.To, f.size, f.sha256, f.mode})
	return b
}

// summary is c for the person who decides: the change, its paths (the end of a long one, where
// its name is), size and mode; never content. The gate cleans it for a terminal.
func (c Change) summary(f file) string {
	mode := ""
	if f.mode != "" {
		mode = ", mode " + f.mode
	}
	switch c.Op {
	case OpDelete:
		return "delete " + short(c.Path)
	case OpRename:
		return fmt.Sprintf("rename %s to %s (%d bytes%s)", short(c.Path), short(c.To), f.size, mode)
	}
	return fmt.Sprintf("write %s (%d bytes%s)", short(c.Path), f.size, mode)
}

// short keeps the last 80 runes of a path: a summary holds 200 (gate.MaxSummary).
func short(p string) string {
	if r := []rune(p); len(r) > 80 {
		return "…" + string(r[len(r)-79:])
	}
	return p
}

// granted decides the ask rule for a change that passed every other rule: it goes ahead only
// with an approval of exactly the canonical bytes it has now.
func granted(ask string, approved, now []byte) *Refusal {
	switch {
	case approved == nil:
		return approval(ask)
	case !bytes.Equal(approved, now):
		return refuse(ReasonMismatch, "the change of %q is not the one approved (the file it moves changed since); ask again", ask)
	}
	return nil
}

// notApproved is the refusal of c, which the gate did not approve for reason r (its text says why).
func notApproved(c Change, r Reason, cause error) *Refusal {
	ref := refuse(r, "the %s of %q needs a person's approval (business.fs.ask): %s", c.Op, c.Path, r.Text())
	ref.cause = cause
	return ref
}

func movesFolder(p string) *Refusal {
	return refuse(ReasonWrongType, "%q is a folder: into, out of or inside a path that needs approval, fs moves files only, one by one (an approval cannot bind a folder's entries)", p)
}

// Tiers: every change to an ask path needs its own approval (gate.Every), and the host refuses
// `approve --session`. A session approval would let an identical change (same path, same bytes)
// repeat unasked until it expired, such as putting back a hook the person has since removed.
var Tiers = map[string]gate.Tier{"fs." + OpWrite: gate.Every, "fs." + OpDelete: gate.Every, "fs." + OpRename: gate.Every}

// GateApprover asks through fs's approval gate g, opened with Tiers (gate.Settings.Open). A nil
// g (no operator key or no gate folder) refuses every change to an ask path with
// approval_unavailable: then nothing is ever written to one.
func GateApprover(g *gate.Gate) Approver { return gateApprover{g} }

type gateApprover struct{ g *gate.Gate }

func (a gateApprover) Approve(ctx context.Context, action string, canonical []byte, summary string) (Approval, error) {
	v, err := a.g.Ask(ctx, action, canonical, summary)
	return Approval{OK: v.Approved(), Reason: Reason(v.Reason())}, err
}
