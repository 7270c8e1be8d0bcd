// Package audit is the tamper-evident record every SHarness component keeps (docs/audit.md): one
// append-only file of JSON lines per component, each line carrying its sequence number, the time,
// the component, the policy hash M and the SHA-256 of the previous line, with checkpoint lines
// that sign the chain head with the component's SVID key. Scan, given a Trust, checks a log
// strictly against the session: the session CA (whose hash the first line names) and the policy
// hash the person supplied.
//
// What verification proves: every line up to the last valid checkpoint is, byte for byte and in order,
// what a holder of the component's SVID key wrote in this session under this policy; a changed,
// deleted, inserted or reordered line, a checkpoint signed by any key not issued by the session
// CA to this component, or a log of another session or policy fails with its line number.
//
// What it does not guarantee:
//   - Anything about lines after the last checkpoint: they are hashed but unsigned, and whoever
//     can write the file can rewrite them. Scan fails such a tail ("unsigned tail after line N")
//     unless told the component is still running, and then lists it. After a crash, the lines
//     since the last checkpoint are signed by the restarted process's first checkpoint: Open
//     checks the chain's links, not its signatures, so a change to them between the crash and the
//     restart goes unnoticed (a change to signed lines still fails Scan).
//   - That a log was not cut exactly after the signed shutdown checkpoint of an earlier process
//     start (a restart begins with a new start record), or deleted whole: one file alone cannot
//     tell. Trust.FinalSeq (the CLI's --final-seq) takes the expected last seq from elsewhere.
//   - That the component told the truth: a compromised component signs whatever it likes with
//     its own key, and a key stolen during the session can sign a rewritten log. Signing times are
//     the signer's own claim; certificate validity is checked at the checkpoint's time.
//   - That no secret is logged: events are typed, field names that name secret material
//     (token, password, *_key...) are refused, but the values are the caller's responsibility.
//     Callers must never pass secrets, request bodies or credentials.
//   - Durability between checkpoints: lines are written at once (a process crash loses
//     nothing written) but fsynced only at checkpoints, at start and at Close.
//
// A crash can leave an unterminated last line. Open never drops it silently: it removes it and
// names it (its length and SHA-256) in the new start record, which Scan reports as a notice,
// as it does a restart that follows no shutdown checkpoint. (A second crash between the removal
// and that record's write loses the name; the removal itself is then still visible as a restart
// without a shutdown checkpoint.) A file whose chain is broken is refused, with the line number,
// rather than continued; Open reads the whole file to check it.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sharness-ai/sharness/internal/strictjson"
)

// Limits of the format: a line longer than MaxLine fails, as does an event value over MaxValue
// bytes or with more than MaxFields extra fields.
const (
	MaxLine   = 64 << 10
	MaxValue  = 1024
	MaxFields = 16
)

// sigDomain separates checkpoint signatures from anything else the SVID key signs.
const sigDomain = "sharness-ai audit checkpoint v1\n"

// Event is one decision a component records. Decision is required; the rest may be empty.
// Callers must never put secret material in any field.
type Event struct {
	Action      string            `json:"action,omitempty"`      // what was attempted: connect, write, tool_use
	Decision    string            `json:"decision,omitempty"`    // allow, deny, ask...
	Reason      string            `json:"reason,omitempty"`      // why, for a person
	Caller      string            `json:"caller,omitempty"`      // who asked (a component, a tool)
	Destination string            `json:"destination,omitempty"` // what it was for (a host:port, a path)
	Fields      map[string]string `json:"fields,omitempty"`      // more detail; see checkKey
}

// record is one line. Field order is the line's key order; omitempty keeps each type's lines to
// its own keys, and parse refuses any line that is not exactly encode of what it decodes to.
type record struct {
	Seq          uint64   `json:"seq"`
	Time         string   `json:"time"`
	Component    string   `json:"component"`
	Policy       string   `json:"policy"`
	Type         string   `json:"type"`                    // start, event or checkpoint
	SessionCA    string   `json:"session_ca,omitempty"`    // start: hex SHA-256 of the CA's DER
	Dropped      string   `json:"dropped,omitempty"`       // start: SHA-256 of an unterminated line removed
	DroppedBytes int      `json:"dropped_bytes,omitempty"` // start: its length
	Event                 // event
	Final        bool     `json:"final,omitempty"` // checkpoint: written at shutdown
	Certs        [][]byte `json:"certs,omitempty"` // checkpoint: the signer's chain, leaf first
	Sig          []byte   `json:"sig,omitempty"`   // checkpoint: signs signedMessage
	Prev         string   `json:"prev"`            // hex SHA-256 of the previous line; "" on line 1
}

// encode is the canonical form of r: one line, without its newline.
func encode(r *record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // readable reasons; still one meaning per line
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func hashLine(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// signedMessage is what a checkpoint's key signs (ECDSA over its SHA-256, Ed25519 as is): the
// checkpoint line without its sig, so the signature covers seq, time, component, policy, final,
// certs and prev, the chain head.
func signedMessage(r *record) ([]byte, error) {
	unsigned := *r
	unsigned.Sig = nil
	b, err := encode(&unsigned)
	return append([]byte(sigDomain), b...), err
}

// parse reads one line (without its newline) strictly: valid JSON without duplicate or unknown
// keys, in canonical form, with the fields its type allows and no others.
func parse(b []byte) (*record, error) {
	r := new(record)
	err := json.Unmarshal(b, r)
	if canon, e := encode(r); err != nil || e != nil || !bytes.Equal(canon, b) {
		// Equality with the canonical form is the strict check (no duplicate, unknown or
		// case-folded key survives it); strictjson says what is wrong where it can.
		if err := strictjson.Decode(b, 3, new(record)); err != nil {
			return nil, err
		}
		return nil, errors.New("not in canonical form (keys, spacing or escapes differ from what the writer writes)")
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Time); err != nil || t.UTC().Format(time.RFC3339Nano) != r.Time {
		return nil, fmt.Errorf("time %q is not RFC 3339 UTC", r.Time)
	}
	if r.Component == "" || !isHash(r.Policy, "sha256:") || r.Seq == 0 {
		return nil, errors.New("missing seq, component or policy")
	}
	if r.Prev != "" && !isHash(r.Prev, "") {
		return nil, fmt.Errorf("prev %q is not a SHA-256", r.Prev)
	}
	start := r.SessionCA != "" || r.Dropped != "" || r.DroppedBytes != 0
	check := r.Final || r.Certs != nil || r.Sig != nil
	event := !reflect.ValueOf(r.Event).IsZero()
	switch {
	case r.Type == "start" && !check && !event:
		if !isHash(r.SessionCA, "") || (r.Dropped != "") != (r.DroppedBytes > 0) || r.Dropped != "" && !isHash(r.Dropped, "") {
			return nil, errors.New("start record without a well-formed session_ca or dropped")
		}
	case r.Type == "event" && !start && !check:
		if err := r.Event.check(); err != nil {
			return nil, err
		}
	case r.Type == "checkpoint" && !start && !event:
		if len(r.Certs) == 0 || len(r.Sig) == 0 {
			return nil, errors.New("checkpoint without certs or sig")
		}
	default:
		return nil, fmt.Errorf("record type %q with fields of another type", r.Type)
	}
	return r, nil
}

// check refuses an event the format cannot carry: no decision, values that are not valid UTF-8
// or are longer than MaxValue, and field names that name secret material.
func (e Event) check() error {
	if e.Decision == "" || len(e.Fields) > MaxFields {
		return fmt.Errorf("event without a decision, or with more than %d fields", MaxFields)
	}
	values := []string{e.Action, e.Decision, e.Reason, e.Caller, e.Destination}
	for k, v := range e.Fields {
		if !fieldName.MatchString(k) {
			return fmt.Errorf("field name %q is not 1 to 32 of [a-z0-9_]", k)
		}
		if slices.Contains(secretWords, k[strings.LastIndexByte(k, '_')+1:]) {
			return fmt.Errorf("field name %q names secret material: audit logs must never hold secrets", k)
		}
		values = append(values, v)
	}
	for _, v := range values {
		if !utf8.ValidString(v) || len(v) > MaxValue {
			return fmt.Errorf("event value of %d bytes that is not valid UTF-8 or longer than %d", len(v), MaxValue)
		}
	}
	return nil
}

// Field names are 1 to 32 characters [a-z0-9_], starting with a letter, and their last word is
// none of secretWords: those name secret material rather than something about it ("token" and
// "api_key" are refused, "token_name" and "key_id" are not). It is a guard against careless
// callers, not a filter.
var (
	fieldName   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	secretWords = []string{"secret", "password", "passwd", "passphrase", "token", "key", "apikey", "cookie", "credential", "credentials", "authorization", "bearer", "signature"}
	sha256Hex   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// isHash reports whether s is prefix and a lower-case hex SHA-256.
func isHash(s, prefix string) bool {
	h, ok := strings.CutPrefix(s, prefix)
	return ok && sha256Hex.MatchString(h)
}
