package main

import (
	"bytes"
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

	"github.com/sharness-ai/sharness/internal/fsguard"
	"github.com/sharness-ai/sharness/internal/strictjson"
)

// Reasons for requests fs cannot read, beside fsguard's.
const (
	reasonBadJSON  = "invalid_json"  // not one strict JSON object
	reasonBadField = "invalid_field" // a field missing, unknown, or of the wrong type
)

type server struct {
	g       *fsguard.Guard
	log     *slog.Logger
	maxBody int64
}

// newServer caps bodies at the largest file in base64 (4/3) plus room for the rest of the
// request; content sent as a JSON string with many escapes can need more, and is refused 413.
func newServer(g *fsguard.Guard, maxFile int64, log *slog.Logger) *server {
	return &server{g: g, log: log, maxBody: maxFile/3*4 + 4 + 64<<10}
}

// op is one decoded request.
type op struct {
	name, path, to, mode string
	content              []byte
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
type badRequest struct{ reason, message string }

// known are the fields of each operation's body.
var known = map[string][]string{"write": {"path", "content", "content_base64", "mode"}, "delete": {"path"}, "rename": {"from", "to"}}

// decode reads the body of operation name (write, delete, rename) strictly: one JSON object,
// no duplicate keys, no key but the known ones spelled exactly, every field of its type.
func decode(name string, body []byte) (op, *badRequest) {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}") // MCP arguments may be absent: then every field is missing
	}
	if err := strictjson.Check(body, 2); err != nil {
		return op{}, &badRequest{reasonBadJSON, "the body is not one strict JSON object: " + err.Error()}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return op{}, &badRequest{reasonBadJSON, "the body must be a JSON object"}
	}
	// Keys must be spelled exactly: encoding/json would also match "PATH" to path.
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(known[name], k) {
			return op{}, &badRequest{reasonBadField, fmt.Sprintf("unknown field %q (%s takes %s)", k, name, strings.Join(known[name], ", "))}
		}
	}
	var w writeRequest
	var d deleteRequest
	var r renameRequest
	v := map[string]any{"write": &w, "delete": &d, "rename": &r}[name]
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return op{}, &badRequest{reasonBadField, fmt.Sprintf("field %s: must be a %s", typeErr.Field, typeErr.Type.String())}
		}
		return op{}, &badRequest{reasonBadJSON, "the body is not a request: " + err.Error()}
	}
	switch name {
	case "delete":
		return op{name: name, path: d.Path}, required("path", d.Path)
	case "rename":
		return op{name: name, path: r.From, to: r.To}, cmpOr(required("from", r.From), required("to", r.To))
	}
	o := op{name: name, path: w.Path, mode: w.Mode}
	switch {
	case w.Content != nil && w.ContentBase64 != nil:
		return op{}, &badRequest{reasonBadField, "fields content and content_base64: give one, not both"}
	case w.Content != nil:
		o.content = []byte(*w.Content)
	case w.ContentBase64 != nil:
		b, err := base64.StdEncoding.Strict().DecodeString(*w.ContentBase64)
		if err != nil {
			return op{}, &badRequest{reasonBadField, "field content_base64: not standard base64 (RFC 4648 with padding)"}
		}
		o.content = b
	default:
		return op{}, &badRequest{reasonBadField, "field content: missing (give content, a UTF-8 string, or content_base64)"}
	}
	return o, required("path", w.Path)
}

func required(field, v string) *badRequest {
	if v == "" {
		return &badRequest{reasonBadField, "field " + field + ": missing"}
	}
	return nil
}

func cmpOr(a, b *badRequest) *badRequest {
	if a != nil {
		return a
	}
	return b
}

// do carries out o and writes the decision's one log line; via is the door (http, mcp).
func (s *server) do(via string, o op) (fsguard.Result, error) {
	var res fsguard.Result
	var err error
	switch o.name {
	case "write":
		res, err = s.g.Write(o.path, o.content, o.mode)
	case "delete":
		res, err = s.g.Delete(o.path)
	case "rename":
		res, err = s.g.Rename(o.path, o.to)
	}
	var ref *fsguard.Refusal
	if errors.As(err, &ref) {
		s.record(via, o, "deny", string(ref.Reason), res, errors.Unwrap(ref))
	} else {
		s.record(via, o, "allow", "", res, err)
	}
	return res, err
}

// record is the canonical decision line: constant keys, never content.
func (s *server) record(via string, o op, decision, reason string, res fsguard.Result, cause error) {
	n := int64(len(o.content)) // what a write brought, refused or not; what a delete or rename moved
	if o.name != "write" {
		n = res.Bytes
	}
	attrs := []any{"via", via, "op", o.name, "path", clip(o.path), "to", clip(o.to), "decision", decision, "reason", reason,
		"bytes", n, "exec_bits_stripped", res.ExecBitsStripped, "created", res.Created}
	if cause != nil {
		attrs = append(attrs, "cause", cause.Error())
	}
	s.log.Info("fs decision", attrs...)
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
		deny(w, http.StatusNotFound, "not_found_error", "not_found", "fs serves POST /v1/write, /v1/delete, /v1/rename, GET /healthz and MCP at /mcp")
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

func answerOf(r fsguard.Result) answer {
	return answer{OK: true, Path: r.Path, Bytes: r.Bytes, ExecBitsStripped: r.ExecBitsStripped, Created: r.Created}
}

func (s *server) api(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			s.record("http", op{name: name}, "deny", string(fsguard.ReasonTooLarge), fsguard.Result{}, nil)
			deny(w, http.StatusRequestEntityTooLarge, "request_too_large", string(fsguard.ReasonTooLarge),
				fmt.Sprintf("the body is larger than %d bytes (give large files as content_base64)", s.maxBody))
			return
		case err != nil:
			deny(w, http.StatusBadRequest, "invalid_request_error", reasonBadJSON, "could not read the body")
			return
		}
		o, bad := decode(name, body)
		if bad != nil {
			s.record("http", op{name: name}, "deny", bad.reason, fsguard.Result{}, nil)
			deny(w, http.StatusBadRequest, "invalid_request_error", bad.reason, bad.message)
			return
		}
		res, err := s.do("http", o)
		var ref *fsguard.Refusal
		switch {
		case errors.As(err, &ref):
			status, typ := statusOf(ref.Reason)
			deny(w, status, typ, string(ref.Reason), ref.Message)
		case err != nil:
			deny(w, http.StatusInternalServerError, "api_error", string(fsguard.ReasonIO), "fs failed")
		default:
			reply(w, http.StatusOK, answerOf(res))
		}
	}
}

// statusOf maps a refusal to its HTTP status and error type; policy decisions are 403.
func statusOf(r fsguard.Reason) (int, string) {
	switch r {
	case fsguard.ReasonTooLarge:
		return http.StatusRequestEntityTooLarge, "request_too_large"
	case fsguard.ReasonNotFound:
		return http.StatusNotFound, "not_found_error"
	case fsguard.ReasonExists, fsguard.ReasonNotEmpty:
		return http.StatusConflict, "conflict_error"
	case fsguard.ReasonIO:
		return http.StatusInternalServerError, "api_error"
	}
	return http.StatusForbidden, "permission_error"
}

// deny answers a refusal: its status, X-Sharness-Deny naming the reason, a JSON error body.
func deny(w http.ResponseWriter, status int, typ, reason, message string) {
	w.Header().Set("X-Sharness-Deny", reason)
	reply(w, status, map[string]any{"error": map[string]string{"type": typ, "reason": reason, "message": message}})
}

func reply(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
