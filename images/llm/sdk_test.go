package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// The real client, pointed at llm the way the agent is (ANTHROPIC_BASE_URL, a placeholder key).
func sdk(h *harness) *anthropic.Client {
	c := anthropic.NewClient(option.WithBaseURL(h.srv.URL), option.WithAPIKey(placeholder), option.WithMaxRetries(0))
	return &c
}

func userText(s string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))}
}

func TestSDKPlain(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	msg, err := sdk(h).Messages.New(context.Background(), anthropic.MessageNewParams{Model: model, MaxTokens: 100, Messages: userText("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "Hello world" || msg.Usage.OutputTokens != 20 {
		t.Errorf("message %+v", msg)
	}
	h.checkUpstreamAuth(t)
}

func TestSDKStreaming(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	stream := sdk(h).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: model, MaxTokens: 100, Messages: userText("hello")})
	var msg anthropic.Message
	events := 0
	for stream.Next() {
		events++
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if events != 7 || msg.Content[0].Text != "Hello world" || msg.Usage.OutputTokens != 15 {
		t.Errorf("%d events, message %+v", events, msg)
	}
	if got := h.s.spent.Load(); got != 25+5+15 {
		t.Errorf("spent %d, want 45 (final cumulative output, never summed)", got)
	}
	h.checkUpstreamAuth(t)
}

func TestSDKToolUse(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	h.up.tool = true
	var tools []anthropic.ToolUnionParam
	if err := json.Unmarshal([]byte(testTools), &tools); err != nil {
		t.Fatal(err)
	}
	c := sdk(h)
	params := anthropic.MessageNewParams{Model: model, MaxTokens: 100, Messages: userText("read the README"), Tools: tools}
	msg, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Content[0].Name != "read_file" {
		t.Fatalf("message %+v", msg)
	}
	// The tool's output holds a secret: the next turn is refused, and the SDK says why.
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, "API_TOKEN="+planted, false)))
	_, err = c.Messages.New(context.Background(), params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(err.Error(), "secret filter matched [planted] in [messages[2]]") {
		t.Fatalf("got %v, want a 400 naming the rule and the place", err)
	}
	if strings.Contains(err.Error(), planted) {
		t.Error("the error echoes the secret")
	}
	for _, u := range h.up.requests() {
		if strings.Contains(u.Body, planted) {
			t.Error("the upstream received the planted secret")
		}
	}
	if n := len(h.up.requests()); n != 1 {
		t.Errorf("upstream got %d requests, want 1", n)
	}
}

func TestSDKErrors(t *testing.T) {
	h := newHarness(t, llmPolicy(t))
	c := sdk(h)
	_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-opus-4-5", MaxTokens: 100, Messages: userText("hi")})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), `the model \"claude-opus-4-5\" is not allowed`) && !strings.Contains(err.Error(), `the model "claude-opus-4-5" is not allowed`) {
		t.Errorf("model not allowed: %v", err)
	}
	// A streaming call refused before any event: the SDK surfaces the same error.
	stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: model, MaxTokens: 99999, Messages: userText("hi")})
	for stream.Next() {
	}
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), "max_tokens 99999 is above") {
		t.Errorf("stream refused: %v", err)
	}
	n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: model, Messages: userText("hi")})
	if err != nil || n.InputTokens != 12 {
		t.Errorf("count tokens: %+v %v", n, err)
	}
	page, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != model {
		t.Errorf("models: %+v %v", page, err)
	}
	if len(h.up.requests()) != 2 {
		t.Errorf("upstream got %d requests, want 2 (count_tokens and models)", len(h.up.requests()))
	}
}

// checkUpstreamAuth: the upstream got the real key and never the placeholder.
func (h *harness) checkUpstreamAuth(t *testing.T) {
	t.Helper()
	for _, u := range h.up.requests() {
		if u.Header.Get("x-api-key") != realKey {
			t.Errorf("upstream x-api-key %q, want the real key", u.Header.Get("x-api-key"))
		}
		for k, vs := range u.Header {
			for _, v := range vs {
				if strings.Contains(v, placeholder) {
					t.Errorf("upstream header %s carries the placeholder", k)
				}
			}
			if strings.HasPrefix(strings.ToLower(k), "x-stainless") {
				t.Errorf("upstream header %s: not on the allowlist", k)
			}
		}
	}
}
