package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// The demo's model conversation: one tool, the turn that calls it, the turn that reads its
// result, and a streamed reply. The agent holds only the placeholder key compose gives it; llm
// adds the real one.
const (
	demoModel = "claude-sonnet-4-5"
	demoTool  = "workspace_status"
	// deniedModel is not in the default policy's models: the demo shows llm refusing it.
	deniedModel = "claude-3-opus-20240229"
)

// demoTools is the agent's whole tool list. The policy pins its hash (business.llm.tools): a
// prompt-injected agent that changes it is refused by llm.
func demoTools() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        demoTool,
		Description: anthropic.String("Reports what the agent's sandbox allows, as JSON."),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}},
	}}}
}

// modelChecks talks to the model through llm, the SDK's way, when compose pointed the agent at
// one (ANTHROPIC_BASE_URL). Each step is one result line.
func modelChecks(ctx context.Context, getenv func(string) string) []result {
	base := getenv("ANTHROPIC_BASE_URL")
	if base == "" {
		return []result{{Check: "model", Expected: "a model call through llm", Skipped: true, Reason: "ANTHROPIC_BASE_URL is not set: no llm in this stack"}}
	}
	// The SDK reads ANTHROPIC_API_KEY itself; it retries twice by default, which would hide
	// a refusal behind three requests.
	client := anthropic.NewClient(option.WithBaseURL(base), option.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(demoModel),
		MaxTokens: 256,
		Tools:     demoTools(),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please use tool " + demoTool + " and summarise what it says."))},
	}
	var out []result
	first, err := client.Messages.New(ctx, params)
	var use *anthropic.ToolUseBlock
	if err == nil {
		for _, b := range first.Content {
			if t, ok := b.AsAny().(anthropic.ToolUseBlock); ok && t.Name == demoTool {
				use = &t
			}
		}
		if use == nil {
			err = fmt.Errorf("the reply (stop_reason %s) has no %s tool call", first.StopReason, demoTool)
		}
	}
	out = append(out, step("model-tool-call", err, "the model asked for "+demoTool))
	if err != nil {
		return out
	}
	params.Messages = append(params.Messages, first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, `{"root":"read-only","network":"net only"}`, false)))
	second, err := client.Messages.New(ctx, params)
	if err == nil && len(second.Content) == 0 {
		err = errors.New("an empty reply")
	}
	out = append(out, step("model-tool-result", err, "the model read the tool's result"))

	// A model the policy does not allow: llm refuses it, and the SDK surfaces the refusal as the
	// API's own error type, with llm's rule in the X-Sharness-Deny header.
	_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(deniedModel), MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
	var apiErr *anthropic.Error
	switch {
	case err == nil:
		err = fmt.Errorf("llm answered a request for %s, a model the policy does not allow", deniedModel)
	case !errors.As(err, &apiErr):
		err = fmt.Errorf("not an API error: %w", err)
	case apiErr.StatusCode != 400 || apiErr.Response.Header.Get("X-Sharness-Deny") != "model_not_allowed":
		err = fmt.Errorf("HTTP %d, deny %q, want 400 model_not_allowed", apiErr.StatusCode, apiErr.Response.Header.Get("X-Sharness-Deny"))
	default:
		err = nil
	}
	out = append(out, step("model-refused", err, "llm refused "+deniedModel+" (400 model_not_allowed)"))

	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: anthropic.Model(demoModel), MaxTokens: 128,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello, streamed."))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			stream.Close()
			return append(out, step("model-stream", err, "streamed"))
		}
	}
	err = stream.Err()
	text := ""
	for _, b := range msg.Content {
		text += b.Text
	}
	if err == nil && strings.TrimSpace(text) == "" {
		err = errors.New("the stream carried no text")
	}
	return append(out, step("model-stream", err, fmt.Sprintf("streamed %d output tokens", msg.Usage.OutputTokens)))
}

// step is one model check's line: the SDK's error is the reason, which for a refusal by llm
// names the rule.
func step(check string, err error, ok string) result {
	r := result{Check: check, Expected: "answered through llm", Got: ok, OK: err == nil}
	if err != nil {
		r.Got, r.Reason = "refused or failed", err.Error()
	}
	return r
}
