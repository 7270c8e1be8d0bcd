package messages

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxEvent bounds one server-sent event. Messages API events are small (deltas); a bigger one is
// a broken or hostile upstream, and buffering it would cost llm its memory limit.
const MaxEvent = 4 << 20

// ErrEventTooLarge is returned by Relay when an event exceeds MaxEvent.
var ErrEventTooLarge = errors.New("sse: event larger than the limit")

// Usage is a response's token count, as the upstream reports it.
type Usage struct {
	Input, CacheCreation, CacheRead, Output int64
}

// Total is what the session budget counts: every input, cache and output token.
func (u Usage) Total() int64 { return u.Input + u.CacheCreation + u.CacheRead + u.Output }

type usageJSON struct {
	Input         *int64 `json:"input_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	Output        *int64 `json:"output_tokens"`
}

// merge takes every count u reports. The counts of message_delta are cumulative (docs/pitfalls.md):
// the last value is the total, and summing would count tokens twice.
func (u *Usage) merge(j *usageJSON) {
	if j == nil {
		return
	}
	for _, p := range []struct {
		dst *int64
		src *int64
	}{{&u.Input, j.Input}, {&u.CacheCreation, j.CacheCreation}, {&u.CacheRead, j.CacheRead}, {&u.Output, j.Output}} {
		if p.src != nil {
			*p.dst = max(*p.src, 0)
		}
	}
}

// UsageOf reads the usage of a non-streaming response body; a body without one counts zero.
func UsageOf(body []byte) Usage {
	var r struct {
		Usage *usageJSON `json:"usage"`
	}
	var u Usage
	if json.Unmarshal(body, &r) == nil {
		u.merge(r.Usage)
	}
	return u
}

// Relay copies a text/event-stream from src to dst one event at a time, calling flush after
// each, so the agent sees every delta when the upstream sends it. It reads the usage of
// message_start and message_delta events on the way and returns it with the first read or write
// error (nil at the end of src; a partial last event is sent only at a clean end). Events are copied byte for byte; only \n and \r\n line ends are
// understood (the Messages API sends \n), so a stream using bare \r would be relayed whole but
// counted as one event.
func Relay(dst io.Writer, flush func(), src io.Reader) (Usage, error) {
	var u Usage
	br := bufio.NewReaderSize(src, 32<<10)
	var event bytes.Buffer
	emit := func() error {
		if event.Len() == 0 {
			return nil
		}
		u.merge(eventUsage(event.Bytes()))
		_, err := dst.Write(event.Bytes())
		event.Reset()
		if err == nil {
			flush()
		}
		return err
	}
	continued := false // the line read is the rest of a line longer than the buffer
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if event.Len()+len(line) > MaxEvent {
				return u, ErrEventTooLarge
			}
			event.Write(line)
		}
		blank := !continued && (string(line) == "\n" || string(line) == "\r\n")
		continued = err == bufio.ErrBufferFull
		switch {
		case continued:
			continue // a long line: keep reading it
		case err == io.EOF:
			return u, emit()
		case err != nil: // a cut stream: the partial event is not sent
			return u, fmt.Errorf("sse: read: %w", err)
		}
		if blank {
			if err := emit(); err != nil {
				return u, err
			}
		}
	}
}

// eventUsage returns the usage an event's data carries, or nil. The data lines are joined with
// \n as the SSE specification says; an event that is not JSON counts nothing.
func eventUsage(event []byte) *usageJSON {
	if !bytes.Contains(event, []byte(`"usage"`)) {
		return nil
	}
	var data []byte
	for line := range bytes.Lines(event) {
		line = bytes.TrimRight(line, "\r\n")
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(rest, []byte(" "))...)
		}
	}
	var e struct {
		Type    string     `json:"type"`
		Usage   *usageJSON `json:"usage"`
		Message struct {
			Usage *usageJSON `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &e) != nil {
		return nil
	}
	switch e.Type {
	case "message_start":
		return e.Message.Usage
	case "message_delta":
		return e.Usage
	}
	return nil
}
