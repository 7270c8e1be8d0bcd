package healthz

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ok     bool
	}{{"ok", http.StatusOK, true}, {"unavailable", http.StatusServiceUnavailable, false}, {"not found", http.StatusNotFound, false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) }))
			defer srv.Close()
			if err := Check(context.Background(), srv.URL+"/healthz"); (err == nil) != tc.ok {
				t.Errorf("Check with %d: err %v, want ok=%v", tc.status, err, tc.ok)
			}
		})
	}
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		if err := Check(context.Background(), url); err == nil {
			t.Error("Check of a closed port succeeded")
		}
	})
}

func TestURL(t *testing.T) {
	for in, want := range map[string]string{":8091": "127.0.0.1:8091", "0.0.0.0:8091": "127.0.0.1:8091", "[::]:8091": "127.0.0.1:8091",
		"10.0.0.2:8091": "10.0.0.2:8091", "localhost:1": "localhost:1"} {
		if got := URL(in); got != "http://"+want+"/healthz" {
			t.Errorf("URL(%q) = %q, want http://%s/healthz", in, got, want)
		}
	}
}
