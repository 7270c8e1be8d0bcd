package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/sharness-ai/sharness/internal/audit"
	"github.com/sharness-ai/sharness/internal/session"
	"github.com/sharness-ai/sharness/policies/pbp"
)

// run starts the session and serves every role's socket until ctx ends (nil) or the session
// expires (an error: the stack needs a new session).
func run(ctx context.Context, cfg config) error {
	m, self, err := session.Load(cfg.policyDir, cfg.getenv)
	if err != nil {
		return &refusal{err}
	}
	if self.Kind != pbp.KindLauncher {
		return &refusal{fmt.Errorf("refusing to start: component %s is a %s, not the launcher", self.Name, self.Kind)}
	}
	ids, err := issue(m, self.Name, cfg.sessionLength, time.Now())
	if err != nil {
		return fmt.Errorf("issue session identities: %w", err)
	}
	// No role gets an SVID before the session is on record (fail closed).
	record, err := openRecord(cfg.auditDir, ids, self.Name, m.Hash)
	if err != nil {
		return &refusal{fmt.Errorf("refusing to start: %w", err)}
	}
	defer record.Finish(cfg.log)
	roles := slices.Sorted(maps.Keys(ids.svids))
	var servers []*grpc.Server
	defer func() {
		// Stop, not GracefulStop: Fetch streams stay open until their clients leave.
		for _, s := range servers {
			s.Stop()
		}
	}()
	errc := make(chan error, len(roles))
	for _, role := range roles {
		ln, err := listen(cfg.identityRoot, role)
		if err != nil {
			return fmt.Errorf("serve %s: %w", role, err)
		}
		srv := newServer(ids, role)
		servers = append(servers, srv)
		go func() { errc <- fmt.Errorf("serve %s: %w", role, srv.Serve(ln)) }()
	}
	// The session's canonical line: the CA's hash is what an audit record names the session by.
	cfg.log.Info("session started", "policy", m.Hash, "session_ca_sha256", ids.caSHA256, "ca_key", "destroyed",
		"not_after", ids.notAfter.UTC().Format(time.RFC3339), "identity_root", cfg.identityRoot, "roles", roles)

	expiry := time.NewTimer(time.Until(ids.notAfter))
	defer expiry.Stop()
	stop := audit.Event{Action: "session_stop", Decision: "stopped", Reason: "signal"}
	select {
	case <-ctx.Done():
		cfg.log.Info("session stopped", "session_ca_sha256", ids.caSHA256)
	case <-expiry.C:
		err = fmt.Errorf("session expired at %s: start a new session", ids.notAfter.UTC().Format(time.RFC3339))
	case err = <-errc:
	}
	if err != nil {
		stop.Decision, stop.Reason = "failed", err.Error()
	}
	record.Record(cfg.log, stop)
	return err
}
