package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// ErrInvalid is wrapped by the error of a log that does not verify (a failed check, not bad input).
var ErrInvalid = errors.New("audit log does not verify")

// maxFailures bounds a report: a thoroughly corrupt file need not list every line.
const maxFailures = 100

// Trust is what a log is verified against: facts about the session from outside the log.
type Trust struct {
	CA           *x509.Certificate // the session CA: every checkpoint's leaf must chain to it
	CASHA256     string            // optional: the hex SHA-256 the session record names; must be CA's
	Policy       string            // the policy hash M every line must carry
	Component    string            // optional: the component the log must belong to
	FinalSeq     map[string]uint64 // optional, by component: the seq its log must end at (catches a cut at a checkpoint)
	AllowRunning bool              // the component still runs: an unsigned tail is listed, not failed
}

// Finding is one failure or notice at a line of the file (counted from 1).
type Finding struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// Report says what a log holds and what is wrong with it: every failure, up to the first 100.
type Report struct {
	Component     string    `json:"component"`
	Policy        string    `json:"policy"`
	SessionCA     string    `json:"session_ca"`
	Lines         int       `json:"lines"`
	LastSeq       uint64    `json:"last_seq"`
	Events        int       `json:"events"`
	Checkpoints   int       `json:"checkpoints"`
	Starts        int       `json:"starts"`                  // process starts: 1 + restarts
	SignedThrough int       `json:"signed_through"`          // the line of the last verified checkpoint
	Final         bool      `json:"final"`                   // ends with a verified shutdown checkpoint
	UnsignedFrom  int       `json:"unsigned_from,omitempty"` // the first line after SignedThrough, if any
	Notices       []Finding `json:"notices,omitempty"`
	Failures      []Finding `json:"failures,omitempty"`
}

// Entry is one event line, as Scan hands it on.
type Entry struct {
	Line      int       `json:"line"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Component string    `json:"component"`
	Event
}

// Scan checks a whole log strictly against t, and calls each, if not nil, for every event line
// that parses, in order. Its error wraps ErrInvalid when a check fails, and the report lists every
// failure (up to 100). With t nil it checks the structure only (syntax, seq, prev, one component, policy and session
// throughout), not signatures nor how the log ends: nothing it hands on is then verified.
func Scan(r io.Reader, t *Trust, each func(Entry)) (Report, error) {
	c := &chain{each: each}
	if t != nil {
		if err := c.trust(t); err != nil {
			return Report{}, err
		}
	}
	tail, err := c.read(r)
	if err != nil {
		return c.rep, fmt.Errorf("read audit log: %w", err)
	}
	c.finish(tail)
	if f := c.rep.Failures; len(f) > 0 {
		return c.rep, fmt.Errorf("%w: line %d: %s", ErrInvalid, f[0].Line, f[0].Reason)
	}
	return c.rep, nil
}

// chain is a log read line by line. Its report's component, policy and session CA are what
// every line must carry: from the Trust, or else from the first line that has them.
type chain struct {
	bundle   *x509bundle.Bundle // the session CA; nil checks no signature
	finalSeq map[string]uint64
	running  bool
	each     func(Entry)
	rep      Report
	line     int
	seq      uint64 // of the last line; 0 if it did not parse
	prev     string // hash of the last line
	final    bool   // the last line is a shutdown checkpoint
}

func (c *chain) trust(t *Trust) error {
	if t.CA == nil || !isHash(t.Policy, "sha256:") {
		return errors.New("verify needs the session CA certificate and the policy hash sha256:<hex>")
	}
	c.rep.Component, c.rep.Policy, c.rep.SessionCA = t.Component, t.Policy, CAHash(t.CA)
	c.finalSeq, c.running = t.FinalSeq, t.AllowRunning
	if t.CASHA256 != "" && t.CASHA256 != c.rep.SessionCA {
		return fmt.Errorf("the session CA's SHA-256 is %s, not %s", c.rep.SessionCA, t.CASHA256)
	}
	for _, u := range t.CA.URIs {
		if td, err := spiffeid.TrustDomainFromURI(u); err == nil {
			c.bundle = x509bundle.FromX509Authorities(td, []*x509.Certificate{t.CA})
			return nil
		}
	}
	return errors.New("the session CA names no SPIFFE trust domain (a URI SAN spiffe://<trust domain>)")
}

// checkSig verifies a checkpoint: its chain leads to the session CA at the checkpoint's time,
// its leaf is the SVID of the log's component, and the leaf's key signed the line.
func (c *chain) checkSig(r *record) error {
	at, _ := time.Parse(time.RFC3339Nano, r.Time) // parse checked it
	id, chains, err := x509svid.ParseAndVerify(r.Certs, c.bundle, x509svid.WithTime(at))
	if err != nil {
		return fmt.Errorf("the signer is no SVID of this session: %w", err)
	}
	if id.TrustDomain() != c.bundle.TrustDomain() || id.Path() != "/"+r.Component {
		return fmt.Errorf("signed by %s, not by component %s", id, r.Component)
	}
	leaf, algo := chains[0][0], x509.ECDSAWithSHA256
	if _, ok := leaf.PublicKey.(ed25519.PublicKey); ok {
		algo = x509.PureEd25519
	}
	if msg, err := signedMessage(r); err != nil || leaf.CheckSignature(algo, msg, r.Sig) != nil {
		return errors.New("the signature does not match the line (changed or re-signed)")
	}
	return nil
}

func (c *chain) fail(line int, format string, a ...any) {
	if len(c.rep.Failures) < maxFailures {
		c.rep.Failures = append(c.rep.Failures, Finding{line, fmt.Sprintf(format, a...)})
	}
}

func (c *chain) note(line int, format string, a ...any) {
	c.rep.Notices = append(c.rep.Notices, Finding{line, fmt.Sprintf(format, a...)})
}

// read feeds every complete line of r to c and returns what follows the last newline. A line
// longer than MaxLine fails and ends the reading.
func (c *chain) read(r io.Reader) ([]byte, error) {
	br := bufio.NewReaderSize(r, MaxLine+1)
	for {
		b, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			c.feed(b[:len(b)-1])
		case errors.Is(err, bufio.ErrBufferFull):
			c.fail(c.line+1, "longer than %d bytes: the rest of the file is not read", MaxLine)
			return nil, nil
		case err == io.EOF:
			return bytes.Clone(b), nil
		default:
			return nil, err
		}
	}
}

func (c *chain) feed(b []byte) {
	c.line++
	n, prevSeq, prevHash, wasFinal := c.line, c.seq, c.prev, c.final
	c.seq, c.prev, c.final, c.rep.Lines = 0, hashLine(b), false, n
	r, err := parse(b)
	if err != nil {
		c.fail(n, "%v", err)
		return
	}
	c.seq, c.rep.LastSeq = r.Seq, r.Seq
	switch {
	case n == 1 && (r.Seq != 1 || r.Prev != "" || r.Type != "start"):
		c.fail(n, "the first line is %s seq %d, want the session start with seq 1 (the log's beginning was removed)", r.Type, r.Seq)
	case n > 1 && prevSeq != 0 && r.Seq != prevSeq+1:
		c.fail(n, "seq %d follows seq %d (a line was deleted, inserted or moved)", r.Seq, prevSeq)
	}
	if n > 1 && r.Prev != prevHash {
		c.fail(n, "prev is not the hash of line %d (that line was changed, or lines were deleted, inserted or moved)", n-1)
	}
	want := &c.rep
	want.Component, want.Policy = cmp.Or(want.Component, r.Component), cmp.Or(want.Policy, r.Policy)
	if r.Component != want.Component || r.Policy != want.Policy {
		c.fail(n, "component %s policy %s, want %s policy %s (another component's log, or another policy)", r.Component, r.Policy, want.Component, want.Policy)
	}
	if wasFinal && r.Type != "start" {
		c.fail(n, "a %s record after the shutdown checkpoint at line %d", r.Type, n-1)
	}
	switch r.Type {
	case "start":
		c.rep.Starts++
		if want.SessionCA = cmp.Or(want.SessionCA, r.SessionCA); r.SessionCA != want.SessionCA {
			c.fail(n, "session CA %s, want %s: a log of another session (a launcher started again under running components begins a new session they are not in: take the stack down and up for a record that verifies)", r.SessionCA, want.SessionCA)
		}
		if n > 1 && !wasFinal {
			c.note(n, "restart after line %d without a shutdown checkpoint (the previous process did not close the log)", n-1)
		}
		if r.Dropped != "" {
			c.note(n, "restart removed an unterminated line of %d bytes (sha256 %s) left by a crash after line %d", r.DroppedBytes, r.Dropped, n-1)
		}
	case "event":
		c.rep.Events++
		if c.each != nil {
			at, _ := time.Parse(time.RFC3339Nano, r.Time)
			c.each(Entry{n, r.Seq, at, r.Component, r.Event})
		}
	case "checkpoint":
		c.rep.Checkpoints++
		c.final = r.Final
		if c.bundle == nil {
			break
		}
		if err := c.checkSig(r); err != nil {
			c.fail(n, "checkpoint: %v", err)
		} else {
			c.rep.SignedThrough = n
		}
	}
}

// finish checks the end of the log; the signed end only when verifying.
func (c *chain) finish(tail []byte) {
	if len(tail) > 0 {
		c.fail(c.line+1, "unterminated last line of %d bytes: cut mid-line, or a crash while it was written", len(tail))
	} else if c.line == 0 && len(c.rep.Failures) == 0 {
		c.fail(1, "empty log: no session start record")
	}
	n, s := c.line, c.rep.SignedThrough
	if n == 0 || c.bundle == nil {
		return
	}
	if want, ok := c.finalSeq[c.rep.Component]; ok && c.rep.LastSeq != want {
		c.fail(n, "the log ends at seq %d, the expected last seq is %d", c.rep.LastSeq, want)
	}
	var problem string
	switch {
	case s < n:
		c.rep.UnsignedFrom = s + 1
		problem = fmt.Sprintf("unsigned tail after line %d: lines %d-%d carry no valid checkpoint signature", s, s+1, n)
	case !c.final:
		problem = "no shutdown checkpoint: the log ends at a periodic checkpoint"
	default:
		c.rep.Final = true
		return
	}
	if c.running {
		c.note(n, "%s (component running)", problem)
	} else {
		c.fail(n, "%s (the log was cut, or its component is still running)", problem)
	}
}
