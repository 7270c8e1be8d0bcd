package audit

import (
	"bufio"
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/sharness-ai/sharness/internal/mtls"
)

// Where a component keeps its log in the stack: DefaultDir is compile.AuditDir (a test holds
// them equal; the images do not import the compiler), on a volume of the component's own that
// outlives the stack. EnvDir overrides it; the log is FileName in that folder.
const (
	DefaultDir = "/var/log/sharness"
	EnvDir     = "SHARNESS_AI_AUDIT_DIR"
	FileName   = "audit.jsonl"
)

// Identity is a component's SVID and the session bundle, as mtls.Source returns them.
type Identity interface {
	x509svid.Source
	x509bundle.Source
}

// StaticIdentity is an Identity from an SVID and the session CA in hand, as DER (the key as
// PKCS#8): the launcher's, which mints them rather than fetching them from a Workload API.
func StaticIdentity(certDER, keyDER, caDER []byte) (Identity, error) {
	s, err := x509svid.ParseRaw(certDER, keyDER)
	if err != nil {
		return nil, fmt.Errorf("parse SVID: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse session CA: %w", err)
	}
	return static{s, x509bundle.FromX509Authorities(s.ID.TrustDomain(), []*x509.Certificate{ca})}, nil
}

type static struct {
	*x509svid.SVID
	*x509bundle.Bundle
}

// OpenComponent opens component's log, dir/audit.jsonl, for the session id belongs to: the
// session CA is the one authority id's bundle holds for its SVID's trust domain, and the SVID
// signs the checkpoints. It refuses, naming dir, when dir is missing or not writable: a
// component must not run without its record (fail closed).
//
// A log an earlier session left in dir (its volume outlived `docker compose down`) is kept,
// renamed audit-<that session's CA hash>.jsonl, and a new chain started: Open would refuse to
// continue it, and it is another session's record, not this one's to change.
func OpenComponent(dir string, id Identity, component, policy string) (*Writer, error) {
	svid, err := id.GetX509SVID()
	if err != nil {
		return nil, fmt.Errorf("open audit log: get SVID: %w", err)
	}
	b, err := id.GetX509BundleForTrustDomain(svid.ID.TrustDomain())
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	if n := len(b.X509Authorities()); n != 1 {
		return nil, fmt.Errorf("open audit log: the bundle of %s holds %d authorities, want the session CA alone", b.TrustDomain(), n)
	}
	if _, _, err := x509svid.Verify(svid.Certificates, b); err != nil {
		return nil, fmt.Errorf("open audit log: the SVID is not the session CA's: %w", err)
	}
	session := CAHash(b.X509Authorities()[0])
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("no audit folder %q (%s, on the component's own volume): refusing to run without a record", dir, EnvDir)
	}
	path := filepath.Join(dir, FileName)
	if err := archive(path, session); err != nil {
		return nil, fmt.Errorf("audit folder %s: set aside the log of an earlier session: %w", dir, err)
	}
	w, err := Open(path, Config{Component: component, Policy: policy, SessionCA: session, SVID: id})
	if err != nil {
		return nil, fmt.Errorf("audit folder %s (must be writable by uid %d): %w", dir, os.Getuid(), err)
	}
	return w, nil
}

// archive renames the log at path to audit-<its session CA hash>.jsonl if its first line is
// the start record of a session other than session. Anything else is left for Open, which
// continues this session's log and refuses a corrupt one, or one another process holds.
func archive(path, session string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil // none yet, or one Open cannot open either: it says why
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return nil // a writer still holds it: Open says so
	}
	line, err := bufio.NewReaderSize(f, MaxLine+1).ReadSlice('\n')
	if err != nil {
		return nil
	}
	r, err := parse(line[:len(line)-1])
	if err != nil || r.Type != "start" || r.SessionCA == session {
		return nil
	}
	old := filepath.Join(filepath.Dir(path), "audit-"+r.SessionCA+".jsonl")
	if _, err := os.Lstat(old); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s exists already", old)
	}
	return os.Rename(path, old)
}

// Clip fits e's values to the format: valid UTF-8 (invalid bytes become U+FFFD) of at most
// MaxValue bytes, cut at a character and ended with "…". A decision must not lose its line
// because a host name or an error was long.
func Clip(e Event) Event {
	e.Action, e.Decision, e.Reason, e.Caller, e.Destination = clip(e.Action), clip(e.Decision), clip(e.Reason), clip(e.Caller), clip(e.Destination)
	e.Fields = maps.Clone(e.Fields)
	for k, v := range e.Fields {
		e.Fields[k] = clip(v)
	}
	return e
}

func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxValue {
		return s
	}
	const ellipsis = "…"
	n := MaxValue - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// Record logs e, clipped, and reports a failure to log rather than to the caller: a decision
// path answers its request whether or not its line was written. After a failure the log takes
// no line (Log keeps failing, and every decision says so in log); Scan shows where it ends.
// A nil Writer records nothing: net without a Workload API has no SVID to sign with, and runs
// without mTLS and without a record (it says so at start; the stack always gives it one).
func (w *Writer) Record(log *slog.Logger, e Event) {
	if w == nil {
		return
	}
	if err := w.Log(Clip(e)); err != nil {
		log.Error("audit log failed: this decision is not recorded", "action", e.Action, "decision", e.Decision, "error", err.Error())
	}
}

// Finish closes w, writing its shutdown checkpoint, and reports a failure to log; a nil Writer
// does nothing.
func (w *Writer) Finish(log *slog.Logger) {
	if w == nil {
		return
	}
	if err := w.Close(); err != nil {
		log.Error("audit log: the shutdown checkpoint failed", "error", err.Error())
	}
}

// FromAttrs makes an Event of a decision's slog attributes (key, value, key, value...): "decision"
// and "reason" go to their fields, every other key to Fields as text, so a component records
// the canonical line it logs. Keys beyond MaxFields are dropped, and counted in "dropped".
func FromAttrs(action string, kv ...any) Event {
	e := Event{Action: action, Fields: map[string]string{}}
	dropped := 0
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		v := fmt.Sprint(kv[i+1])
		switch {
		case k == "decision":
			e.Decision = v
		case k == "reason":
			e.Reason = v
		case len(e.Fields) < MaxFields-1:
			e.Fields[k] = v
		default:
			dropped++
		}
	}
	if dropped > 0 {
		e.Fields["dropped"] = fmt.Sprint(dropped)
	}
	return e
}

// OpenOwn opens a component's log in the folder the stack gives it (EnvDir, else DefaultDir),
// signed with id, or, when id is nil, with the SVID the Workload API serves (mtls.Source): for a
// component that needs its identity for nothing else (bash, fs). It refuses, naming why, when
// either cannot be had: a component without its record does not run. done writes the shutdown
// checkpoint, then lets the Workload API source go.
func OpenOwn(ctx context.Context, id Identity, component, policy string) (w *Writer, done func(*slog.Logger), err error) {
	release := func() {}
	if id == nil {
		src, err := mtls.Source(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("refusing to start: %w", err)
		}
		id, release = src, func() { src.Close() }
	}
	w, err = OpenComponent(cmp.Or(os.Getenv(EnvDir), DefaultDir), id, component, policy)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("refusing to start: %w", err)
	}
	return w, func(log *slog.Logger) { w.Finish(log); release() }, nil
}
