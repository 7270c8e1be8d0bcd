package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Until(ctx, srv, ln, time.Second) }()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatalf("the server does not answer: %v", err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Until after the context ended: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Until did not return after its context ended")
	}
	if _, err := http.Get("http://" + ln.Addr().String()); err == nil {
		t.Error("the server still answers after shutdown")
	}

	// A server that fails returns its error at once.
	ln.Close()
	if err := Until(context.Background(), &http.Server{}, ln, time.Second); err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Until on a closed listener: %v, want the listener's error", err)
	}
}
