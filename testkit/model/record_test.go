package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
)

type recordJSON struct {
	Requests []entry `json:"requests"`
	Dropped  int     `json:"dropped"`
}

func readRecord(t *testing.T, rc *recorder) recordJSON {
	t.Helper()
	w := httptest.NewRecorder()
	rc.handler().ServeHTTP(w, httptest.NewRequest("GET", "/_record", nil))
	var r recordJSON
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &r) != nil || r.Requests == nil {
		t.Fatalf("GET /_record = %d %s", w.Code, w.Body)
	}
	return r
}

func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestRecord: what the SDK sent is in the record, key headers hashed, then cleared.
func TestRecord(t *testing.T) {
	srv, rec := newServer(t, nil)
	if r := readRecord(t, rec); len(r.Requests) != 0 {
		t.Fatalf("a fresh record holds %d requests", len(r.Requests))
	}
	p := anthropic.MessageNewParams{Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{user("the prompt")}}
	c1, c2 := client(srv, option.WithHeader("anthropic-beta", "b1")), client(srv, option.WithHeaderDel("x-api-key"), option.WithAuthToken("tok"))
	c1.Messages.New(context.Background(), p)
	c2.Messages.New(context.Background(), p, option.WithQuery("beta", "true"))
	r := readRecord(t, rec)
	if len(r.Requests) != 2 || r.Dropped != 0 {
		t.Fatalf("record = %+v, want two requests", r)
	}
	type view struct {
		Seq                  int64
		Method, Path, Query  string
		Key, Auth, Beta      []string
		HasPrompt, HasSecret bool
	}
	var got []view
	for _, e := range r.Requests {
		raw, _ := json.Marshal(e)
		got = append(got, view{Seq: e.Seq, Method: e.Method, Path: e.Path, Query: e.Query, Key: e.Header["X-Api-Key"],
			Auth: e.Header["Authorization"], Beta: e.Header["Anthropic-Beta"],
			HasPrompt: strings.Contains(e.Body, "the prompt"),
			HasSecret: strings.Contains(string(raw), testKey) || strings.Contains(string(raw), "Bearer tok")})
	}
	want := []view{
		{Seq: 1, Method: "POST", Path: "/v1/messages", Key: []string{hashOf(testKey)}, Beta: []string{"b1"}, HasPrompt: true},
		{Seq: 2, Method: "POST", Path: "/v1/messages", Query: "beta=true", Auth: []string{hashOf("tok")}, HasPrompt: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	w := httptest.NewRecorder()
	rec.handler().ServeHTTP(w, httptest.NewRequest("DELETE", "/_record", nil))
	if w.Code != http.StatusNoContent || len(readRecord(t, rec).Requests) != 0 {
		t.Errorf("DELETE /_record = %d, record not cleared", w.Code)
	}
	w = httptest.NewRecorder()
	rec.handler().ServeHTTP(w, httptest.NewRequest("POST", "/_record", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /_record = %d, want 405", w.Code)
	}
}

// TestRecordBounds: the oldest entries go first, by count and by bytes, and are counted.
func TestRecordBounds(t *testing.T) {
	tests := []struct {
		name           string
		maxN, maxBytes int
		bodies         []string
		wantSeq        []int64
		wantDropped    int
	}{
		{"within", 3, 100, []string{"a", "b"}, []int64{1, 2}, 0},
		{"by count", 2, 100, []string{"a", "b", "c"}, []int64{2, 3}, 1},
		{"by bytes", 10, 5, []string{"aaa", "bbb", "c"}, []int64{2, 3}, 1},
		{"one body over the budget is kept", 10, 2, []string{"a", "bbbbb"}, []int64{2}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newRecorder(tt.maxN, tt.maxBytes)
			for i, b := range tt.bodies {
				rc.add(int64(i+1), httptest.NewRequest("POST", "/v1/messages", nil), []byte(b), false)
			}
			r := readRecord(t, rc)
			var seqs []int64
			for _, e := range r.Requests {
				seqs = append(seqs, e.Seq)
			}
			if diff := cmp.Diff(tt.wantSeq, seqs); diff != "" || r.Dropped != tt.wantDropped {
				t.Errorf("kept (-want +got):\n%s dropped %d, want %d", diff, r.Dropped, tt.wantDropped)
			}
		})
	}
}

func newRecorder(maxEntries, maxBytes int) *recorder {
	return &recorder{entries: []*entry{}, maxEntries: maxEntries, maxLen: maxBytes}
}
