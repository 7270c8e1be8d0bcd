// Command sharness-model is the offline model of the SHarness demo and e2e suite: a scripted,
// deterministic Messages API that stands in for api.anthropic.com on the offline world's egress
// network, and records every request that reaches it.
//
// It serves HTTPS (HTTP/1.1 and h2) on :443 for api.anthropic.com with the leaf the harness made
// (testkit/worldca, internal/throwawayca) and handed it in MODEL_TLS_CERT (the chain, ending with the
// throwaway CA) and MODEL_TLS_KEY; llm trusts that CA through
// SHARNESS_AI_LLM_UNSAFE_CA_PEM_FOR_TESTS. Endpoints:
// POST /v1/messages (JSON, or SSE with "stream": true), POST /v1/messages/count_tokens and
// GET /v1/models; anything else is 404 not_found_error. Every request needs a key (x-api-key,
// or Authorization: Bearer; else 401 authentication_error; with MODEL_EXPECT_KEY_SHA256 set,
// only the key with that SHA-256) and an anthropic-version header (else 400). Errors have the
// API's shape, {"type":"error","error":{"type":...,"message":...}}, and every answer a
// Request-Id, req_offline_<seq>.
//
// The script, read from the last user message (its text blocks, joined, less those that are a
// <system-reminder>: the context Claude Code adds to what the person typed):
//
//   - "offline: error overloaded" → 529 overloaded_error; "offline: error invalid" → 400
//     invalid_request_error; "offline: error rate_limit" → 429 rate_limit_error; "offline:
//     error api" → 500 api_error. The SDK retries 429 and 5xx twice by default, so one call
//     reaches the model three times; 429 and 529 carry Retry-After: 0 to make that quick.
//     "offline: error stream" → a stream that starts (message_start, content_block_start,
//     ping), then ends with an overloaded_error event; 529 when not streaming.
//   - a user message holding tool_result blocks → "offline model: tool result of N bytes
//     received: TEXT", N the bytes of text in those results, TEXT that text cut at 200 bytes.
//   - "use tool NAME" when the request declares tools → a text block "offline model: calling
//     tool NAME" and a tool_use block {"name":NAME,"input":INPUT}, stop_reason tool_use, INPUT
//     the JSON object that follows "use tool NAME " to the end of the text, or {}; a NAME the
//     request does not declare gets a text reply saying so. For Claude Code in the stack:
//     claude -p 'use tool mcp__bash__bash {"command":"echo hi"}' runs the command in a bash
//     sandbox and ends with the result quoted.
//   - "offline: long N" → a text reply of N numbered words ("w0 w1 …", at most 20000), for the
//     soak (e2e TestSoak); with "offline: pace D" (D ms, at most 100) a stream waits D ms after
//     each word, so that a stream lasts as long as a long answer of the real model does.
//   - anything else → "offline model: N messages, last user text: TEXT" (TEXT cut at 200
//     bytes), stop_reason end_turn.
//
// A reply over max_tokens is cut to its first block's first bytes, stop_reason max_tokens.
// Tokens are a quarter of the bytes (input: system, message contents, tool names), so the same
// request always gets the same usage, and count_tokens agrees with it. Any model name is
// answered: the allowlist is llm's.
//
// The record holds the latest 256 requests within 32 MiB of bodies, each as it arrived (seq,
// time, method, host, path, query, headers, body), except that x-api-key, Authorization and
// Proxy-Authorization values are replaced by "sha256:<hex>" of the key (of the token after
// "Bearer "). GET /_record serves {"requests":[oldest first],"dropped":N} as JSON on a separate
// plain-HTTP listener (:8099); DELETE /_record clears it. A test proving that something did not
// reach the model needs dropped = 0. The listener has no authentication: it is for the host's
// e2e suite on the test network.
//
// It is test infrastructure: it guarantees nothing about the stack, its CA must never be
// trusted outside a test, and its record holds every prompt it was sent.
//
// Usage:
//
//	sharness-model          serve (the container's entrypoint)
//	sharness-model health   the healthcheck: the CA verifies a TLS handshake on the API port
//
// Environment (no flags, like the world's): MODEL_TLS_CERT and MODEL_TLS_KEY (PEM, required; the
// leaf must be valid for api.anthropic.com), MODEL_LISTEN (":443"), MODEL_RECORD_LISTEN (":8099"),
// MODEL_EXPECT_KEY_SHA256 (64 hex digits; unset accepts any key).
//
// Exit codes: 0 stopped on a signal, or healthy; 1 failed, or unhealthy; 2 usage error.
package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/sharness-ai/sharness/internal/throwawayca"
)

// apiHost is the one name the model's certificate carries.
const apiHost = "api.anthropic.com"

type config struct {
	listen, recordListen string
	cert                 tls.Certificate // the API's leaf
	ca                   *x509.CertPool  // the CA that signed it, for the healthcheck
	keyHash              []byte          // nil: any key
	health               bool
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := configFrom(os.Args[1:], os.Getenv)
	if err != nil {
		log.Error("sharness-model refused to start", "error", err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if cfg.health {
		err = health(ctx, cfg)
	} else {
		err = run(ctx, cfg, log)
	}
	if err != nil {
		log.Error("sharness-model failed", "error", err.Error())
		os.Exit(1)
	}
}

// configFrom reads the environment, then defaults, and the one optional argument.
func configFrom(args []string, getenv func(string) string) (config, error) {
	cfg := config{listen: cmp.Or(getenv("MODEL_LISTEN"), ":443"), recordListen: cmp.Or(getenv("MODEL_RECORD_LISTEN"), ":8099"),
		health: slices.Equal(args, []string{"health"})}
	if len(args) != 0 && !cfg.health {
		return config{}, fmt.Errorf("unknown arguments %q (usage: sharness-model [health])", args)
	}
	var err error
	if cfg.cert, cfg.ca, err = throwawayca.Leaf(getenv("MODEL_TLS_CERT"), getenv("MODEL_TLS_KEY"), []string{apiHost}, time.Now()); err != nil {
		return config{}, fmt.Errorf("MODEL_TLS_CERT, MODEL_TLS_KEY: %w (the harness makes them: testkit/worldca)", err)
	}
	if h := getenv("MODEL_EXPECT_KEY_SHA256"); h != "" {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return config{}, fmt.Errorf("MODEL_EXPECT_KEY_SHA256 %q is not 64 hex digits", h)
		}
		cfg.keyHash = b
	}
	return cfg, nil
}

// run opens both listeners, serves the API and the record, and on ctx's end shuts both down,
// letting streams finish.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	var lns []net.Listener
	for _, addr := range []string{cfg.listen, cfg.recordListen} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		defer l.Close()
		lns = append(lns, l)
	}
	apiLn, recLn := lns[0], lns[1]
	rec, errLog := &recorder{entries: []*entry{}, maxEntries: 256, maxLen: 32 << 20}, slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	// No WriteTimeout: it would cut long streams (docs/pitfalls.md).
	apiSrv := &http.Server{Handler: &api{keyHash: cfg.keyHash, rec: rec, log: log}, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: errLog, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cfg.cert}, MinVersion: tls.VersionTLS12}}
	recSrv := &http.Server{Handler: rec.handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	errc := make(chan error, 2)
	go func() { errc <- apiSrv.ServeTLS(apiLn, "", "") }()
	go func() { errc <- recSrv.Serve(recLn) }()
	log.Info("sharness-model serving", "api", apiLn.Addr().String(), "record", recLn.Addr().String(), "key_pinned", cfg.keyHash != nil)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(err, apiSrv.Shutdown(sctx), recSrv.Shutdown(sctx))
}

// health succeeds once the server answering TLS on the API port chains to the handed-over CA.
func health(ctx context.Context, cfg config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: apiHost, RootCAs: cfg.ca, MinVersion: tls.VersionTLS12}}
	c, err := d.DialContext(ctx, "tcp", cfg.listen) // ":443" dials this host
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	return c.Close()
}
