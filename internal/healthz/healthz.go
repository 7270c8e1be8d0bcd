// Package healthz is the health check a component's image runs on itself for the compose file's
// healthcheck (`/sharness-<component> health`): a GET of the component's own /healthz on the
// loopback, since a FROM scratch image has no curl.
//
// It says only that the server answers; what the component checked at start is in its log.
package healthz

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Timeout bounds one check: the engine runs it every interval.
const Timeout = 2 * time.Second

// Check asks url and succeeds on a 200 alone.
func Check(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	// No proxy: the component's own loopback, whatever HTTP_PROXY says.
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("unhealthy: %s answered %s", url, resp.Status)
	}
	return nil
}

// URL is the /healthz address of a server listening on listen (":8090", "0.0.0.0:8091", ...), as
// its own container's loopback reaches it.
func URL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}
