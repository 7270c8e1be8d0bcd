package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/sharness-ai/sharness/internal/session"
)

// healthTimeout bounds the whole check: the compose healthcheck runs it often.
const healthTimeout = 2 * time.Second

// health succeeds only if every role's socket answers FetchX509SVID, through go-spiffe's own
// client, with exactly that role's SVID, valid against the bundle it came with.
func health(ctx context.Context, cfg config) error {
	m, self, err := session.Load(cfg.policyDir, cfg.getenv)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	for _, c := range m.Components {
		if c.Name == self.Name {
			continue
		}
		if err := probe(ctx, socketPath(cfg.identityRoot, c.Name), c.SPIFFEID); err != nil {
			return fmt.Errorf("unhealthy: role %s: %w", c.Name, err)
		}
	}
	return nil
}

func probe(ctx context.Context, path, want string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no socket: %w", err)
	}
	client, err := workloadapi.New(ctx, workloadapi.WithAddr("unix://"+path))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer client.Close()
	x, err := client.FetchX509Context(ctx)
	if err != nil {
		return fmt.Errorf("FetchX509SVID: %w", err)
	}
	if len(x.SVIDs) != 1 || x.SVIDs[0].ID.String() != want {
		return fmt.Errorf("socket serves %d SVIDs, not exactly %s", len(x.SVIDs), want)
	}
	if _, _, err := x509svid.Verify(x.SVIDs[0].Certificates, x.Bundles); err != nil {
		return fmt.Errorf("served SVID does not verify against its bundle: %w", err)
	}
	return nil
}
