package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/sharness-ai/sharness/images/fs/guard"
	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/strictjson"
)

type server struct {
	g       *guard.Guard
	gate    guard.Approver // asked about every change to an ask path
	log     *slog.Logger
	rec     *audit.Writer // fs's audit log; nil records nothing
	maxBody int64
}

// newServer caps bodies at the largest file in base64 (4/3) plus room for the rest of the
// request; content sent as a JSON string with many escapes can need more, and is refused 413.
func newServer(g *guard.Guard, gate guard.Approver, maxFile int64, log *slog.Logger) *server {
	return &server{g: g, gate: gate, log: log, maxBody: maxFile/3*4 + 4 + 64<<10}
}

type writeRequest struct {
	Path          string  `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"content_base64"`
	Mode          string  `json:"mode"`
}

type deleteRequest struct {
	Path string `json:"path"`
}

type renameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// badRequest is a request fs cannot read; its message names the field when one is at fault.
type badRequest struct {
	reason  guard.Reason
	message string
}

// known are the fields of each operation's body.
var known = map[string][]string{"write": {"path", "content", "content_base64", "mode"}, "delete": {"path"}, "rename": {"from", "to"}}

// decode reads the body of operation name (write, delete, rename) strictly: one JSON object,
// no duplicate keys, no key but the known ones spelled exactly, every field of its type.
func decode(name string, body []byte) (guard.Change, *badRequest) {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}") // MCP arguments may be absent: then every field is missing
	}
	if err := strictjson.Check(body, 2); err != nil {
		return guard.Change{}, &badRequest{guard.ReasonBadJSON, "the body is not one strict JSON object: " + err.Error()}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return guard.Change{}, &badRequest{guard.ReasonBadJSON, "the body must be a JSON object"}
	}
	// Keys must be spelled exactly: encoding/json would also match "PATH" to path.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(known[name], k) {
			return guard.Change{}, &badRequest{guard.ReasonBadField, fmt.Sprintf("unknown field %q (%s takes %s)", k, name, strings.Join(known[name], ", "))}
		}
	}
	var w writeRequest
	var d deleteRequest
	var r renameRequest
	v := map[string]any{"write": &w, "delete": &d, "rename": &r}[name]
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return guard.Change{}, &badRequest{guard.ReasonBadField, fmt.Sprintf("field %s: must be a %s", typeErr.Field, typeErr.Type.String())}
		}
		return guard.Change{}, &badRequest{guard.ReasonBadJSON, "the body is not a request: " + err.Error()}
	}
	switch name {
	case "delete":
		return guard.Change{Op: name, Path: d.Path}, required("path", d.Path)
	case "rename":
		return guard.Change{Op: name, Path: r.From, To: r.To}, cmpOr(required("from", r.From), required("to", r.To))
	}
	o := guard.Change{Op: name, Path: w.Path, Mode: w.Mode}
	switch {
	case w.Content != nil && w.ContentBase64 != nil:
		return guard.Change{}, &badRequest{guard.ReasonBadField, "fields content and content_base64: give one, not both"}
	case w.Content != nil:
		o.Content = []byte(*w.Content)
	case w.ContentBase64 != nil:
		b, err := base64.StdEncoding.Strict().DecodeString(*w.ContentBase64)
		if err != nil {
			return guard.Change{}, &badRequest{guard.ReasonBadField, "field content_base64: not standard base64 (RFC 4648 with padding)"}
		}
		o.Content = b
	default:
		return guard.Change{}, &badRequest{guard.ReasonBadField, "field content: missing (give content, a UTF-8 string, or content_base64)"}
	}
	return o, required("path", w.Path)
}

func required(field, v string) *badRequest {
	if v == "" {
		return &badRequest{guard.ReasonBadField, "field " + field + ": missing"}
	}
	return nil
}

func cmpOr(a, b *badRequest) *badRequest {
	if a != nil {
		return a
	}
	return b
}

// do carries out o, asking the gate first about a change to an ask path (blocking until the
// operator decides, the request expires or ctx ends), and writes the decision's one log line;
// via is the door (http, mcp).
func (s *server) do(ctx context.Context, via string, o guard.Change) (guard.Result, error) {
	if err := s.rec.Err(); err != nil { // no change that cannot be recorded (issue 22)
		s.log.Error("fs: refusing: the audit log takes no more lines", "op", o.Op, "error", err.Error())
		return guard.Result{}, &guard.Refusal{Reason: guard.ReasonAudit, Message: guard.ReasonAudit.Text()}
	}
	res, err := s.g.Apply(ctx, o, s.gate)
	var ref *guard.Refusal
	if errors.As(err, &ref) {
		s.record(via, o, "deny", string(ref.Reason), res, errors.Unwrap(ref))
	} else {
		s.record(via, o, "allow", string(res.Approval), res, err)
	}
	return res, err
}

// record is the canonical decision line: constant keys, never content. digest is the approval
// request's, when the gate was asked.
func (s *server) record(via string, o guard.Change, decision, reason string, res guard.Result, cause error) {
	n := int64(len(o.Content)) // what a write brought, refused or not; what a delete or rename moved
	if o.Op != guard.OpWrite {
		n = res.Bytes
	}
	attrs := []any{"via", via, "op", o.Op, "path", clip(o.Path), "to", clip(o.To), "decision", decision, "reason", reason,
		"bytes", n, "exec_bits_stripped", res.ExecBitsStripped, "created", res.Created, "digest", res.Digest}
	if cause != nil {
		attrs = append(attrs, "cause", cause.Error())
	}
	s.log.Info("fs decision", attrs...)
	s.rec.Record(s.log, audit.FromAttrs("fs."+string(o.Op), attrs...))
}

func clip(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, name := range []string{"write", "delete", "rename"} {
		mux.HandleFunc("POST /v1/"+name, s.api(name))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, map[string]bool{"ok": true}) })
	mux.Handle("/mcp", s.mcpHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		deny(w, guard.ReasonNotFound, "fs serves POST /v1/write, /v1/delete, /v1/rename, GET /healthz and MCP at /mcp")
	})
	return mux
}

// answer is a change's success, the JSON API's 200 body and the MCP tools' result.
type answer struct {
	OK               bool   `json:"ok"`
	Path             string `json:"path"`
	Bytes            int64  `json:"bytes"`
	ExecBitsStripped bool   `json:"exec_bits_stripped"`
	Created          bool   `json:"created"`
}

func answerOf(r guard.Result) answer {
	return answer{OK: true, Path: r.Path, Bytes: r.Bytes, ExecBitsStripped: r.ExecBitsStripped, Created: r.Created}
}

func (s *server) api(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			s.record("http", guard.Change{Op: name}, "deny", string(guard.ReasonTooLarge), guard.Result{}, nil)
			deny(w, guard.ReasonTooLarge, fmt.Sprintf("the body is larger than %d bytes (give large files as content_base64)", s.maxBody))
			return
		case err != nil:
			deny(w, guard.ReasonBadJSON, "could not read the body")
			return
		}
		o, bad := decode(name, body)
		if bad != nil {
			s.record("http", guard.Change{Op: name}, "deny", string(bad.reason), guard.Result{}, nil)
			deny(w, bad.reason, bad.message)
			return
		}
		res, err := s.do(r.Context(), "http", o)
		var ref *guard.Refusal
		switch {
		case errors.As(err, &ref):
			deny(w, ref.Reason, ref.Message)
		case err != nil:
			deny(w, guard.ReasonIO, "")
		default:
			reply(w, http.StatusOK, answerOf(res))
		}
	}
}

// deny answers a refusal of reason: its status and error type (guard's table), X-Sharness-Deny
// naming the reason, a JSON error body; message "" is the reason's own text.
func deny(w http.ResponseWriter, reason guard.Reason, message string) {
	status, typ := reason.Status()
	w.Header().Set("X-Sharness-Deny", string(reason))
	reply(w, status, map[string]any{"error": map[string]string{"type": typ, "reason": string(reason), "message": cmp.Or(message, reason.Text())}})
}

func reply(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
