package messages

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// stream is a real Messages API stream, shortened (docs.anthropic.com, "Streaming Messages").
const stream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":3,"cache_read_input_tokens":7,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":5}}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

type flushRecorder struct {
	bytes.Buffer
	events []string
	mark   int
}

func (f *flushRecorder) flush() {
	f.events = append(f.events, f.String()[f.mark:])
	f.mark = f.Len()
}

func TestRelay(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		usage  Usage
		events int
		err    error
	}{
		{"stream", stream, Usage{Input: 25, CacheCreation: 3, CacheRead: 7, Output: 15}, 7, nil},
		{"crlf", strings.ReplaceAll(stream, "\n", "\r\n"), Usage{Input: 25, CacheCreation: 3, CacheRead: 7, Output: 15}, 7, nil},
		{"delta with input (server tools)", "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":9,\"output_tokens\":3}}\n\n", Usage{Input: 9, Output: 3}, 2, nil},
		{"multi-line data", "event: message_delta\ndata: {\"type\":\"message_delta\",\ndata: \"usage\":{\"output_tokens\":4}}\n\n", Usage{Output: 4}, 1, nil},
		{"negative counts clamp", "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-4}}\n\n", Usage{}, 1, nil},
		{"usage in other events ignored", "data: {\"type\":\"content_block_delta\",\"usage\":{\"output_tokens\":4}}\n\n", Usage{}, 1, nil},
		{"not json", "data: usage\n\n", Usage{}, 1, nil},
		{"partial last event sent at EOF", "data: {\"type\":\"ping\"}\n", Usage{}, 1, nil},
		{"empty", "", Usage{}, 0, nil},
		{"long line", "data: " + strings.Repeat("x", 100<<10) + "\r\n\r\n", Usage{}, 1, nil},
		{"too large", "data: " + strings.Repeat("x", MaxEvent) + "\n\n", Usage{}, 0, ErrEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out flushRecorder
			u, err := Relay(&out, out.flush, iotest.OneByteReader(strings.NewReader(tt.in)))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.usage, u); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if len(out.events) != tt.events {
				t.Errorf("flushed %d events, want %d", len(out.events), tt.events)
			}
			if tt.err == nil && out.String() != tt.in {
				t.Errorf("relay changed the bytes")
			}
		})
	}
	if u := (Usage{1, 2, 3, 4}); u.Total() != 10 {
		t.Errorf("Total = %d", u.Total())
	}
}

func TestRelayErrors(t *testing.T) {
	// A cut stream: the complete events before the cut are sent, the partial one is not.
	in := io.MultiReader(strings.NewReader("data: {\"type\":\"ping\"}\n\ndata: {\"ty"), iotest.ErrReader(io.ErrUnexpectedEOF))
	var out flushRecorder
	if _, err := Relay(&out, out.flush, in); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v", err)
	}
	if out.String() != "data: {\"type\":\"ping\"}\n\n" {
		t.Errorf("sent %q", out.String())
	}
	// A client that went away stops the relay.
	werr := errors.New("client gone")
	if _, err := Relay(errWriter{werr}, func() {}, strings.NewReader(stream)); !errors.Is(err, werr) {
		t.Errorf("err = %v", err)
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func TestUsageOf(t *testing.T) {
	for _, tt := range []struct {
		body string
		want Usage
	}{
		{`{"type":"message","usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":5}}`, Usage{Input: 10, CacheRead: 5, Output: 20}},
		{`{"input_tokens":10}`, Usage{}},
		{`not json`, Usage{}},
	} {
		if diff := cmp.Diff(tt.want, UsageOf([]byte(tt.body))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.body, diff)
		}
	}
}
