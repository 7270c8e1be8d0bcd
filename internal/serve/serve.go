// Package serve runs a component's HTTP server until its context ends, then shuts it down
// gracefully: the pattern every component's main needs once.
//
// It guarantees only the order (stop accepting, wait up to grace for requests in flight); a
// stream longer than grace is cut.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Until serves srv on ln until ctx ends or the server fails, then shuts it down, waiting up to
// grace for requests in flight. A shutdown cut short by grace is not an error.
func Until(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
