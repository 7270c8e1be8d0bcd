package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharness-ai/sharness/images/bash/sandbox"
)

// BenchmarkBashTool measures, interleaved in one run with plain bash running the same command
// as the baseline: a sandbox alone whose init is this test binary, which links what
// sharness-bash links (its package initialisation and size are part of every sandbox's start),
// and one bash tool call through the whole server (streamable HTTP, MCP, the argument checks,
// the sandbox, the secret filter). The 1 MB file is text: control bytes would be replaced
// (printable). It reports each variant's p50 and p90 in milliseconds and the cost added at p50,
// and at p50 the ratios of the 1 MB cat through the tool to the same cat by plain bash (issue
// 21's goal: 2 at most) and of what the MiB itself adds in each (cat less true).
// images/bash/sandbox's BenchmarkSandbox compares the sandbox with unshare(1) and bwrap.
//
//	go test -run '^$' -bench BenchmarkBashTool -benchtime 200x ./images/bash
func BenchmarkBashTool(b *testing.B) {
	cs, ws, _ := connect(b, policy{profiles: []string{"analyse", "build"}, proxy: "net:3128"})
	if err := os.WriteFile(filepath.Join(ws, "1mb"), []byte(strings.Repeat("0123456789abcdef", 1<<16)), 0o644); err != nil {
		b.Fatal(err)
	}
	sb, _ := testSandbox() // connect checked it
	tool := func(command string) func() error {
		return func() error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
			if err == nil && (res.IsError || res.StructuredContent.(map[string]any)["exit_code"] != float64(0)) {
				err = fmt.Errorf("%s: %v", command, res.Content)
			}
			return err
		}
	}
	plain := func(command string) func() error {
		return func() error {
			cmd := exec.Command("bash", "-c", command)
			cmd.Dir = ws
			_, err := cmd.Output()
			return err
		}
	}
	variants := []struct {
		name     string
		run      func() error
		baseline int
	}{
		{"bash-true", plain("true"), 0},
		{"sandbox-true", func() error {
			_, err := sb.Run(context.Background(), sandbox.Spec{Command: "true", Profile: sandbox.Analyse, Workspace: ws})
			return err
		}, 0},
		{"tool-true", tool("true"), 0},
		{"bash-cat-1MB", plain("cat 1mb"), 3},
		{"tool-cat-1MB", tool("cat 1mb"), 3},
	}
	const bashTrue, toolTrue, bashCat, toolCat = 0, 2, 3, 4
	times := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			start := time.Now()
			if err := v.run(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	p50 := make([]float64, len(variants))
	var table strings.Builder
	for i, v := range variants {
		p50[i] = percentile(times[i], 50)
		p90 := percentile(times[i], 90)
		b.ReportMetric(p50[i], v.name+"-p50-ms")
		b.ReportMetric(p90, v.name+"-p90-ms")
		fmt.Fprintf(&table, "%-14s p50 %7.2f ms  p90 %7.2f ms  added %7.2f ms\n", v.name, p50[i], p90, p50[i]-p50[v.baseline])
	}
	whole, mib := p50[toolCat]/p50[bashCat], (p50[toolCat]-p50[toolTrue])/(p50[bashCat]-p50[bashTrue])
	b.ReportMetric(whole, "tool-cat÷bash-cat")
	b.ReportMetric(mib, "tool-MiB÷bash-MiB")
	fmt.Fprintf(&table, "tool-cat-1MB ÷ bash-cat-1MB: %.2f (goal: 2 at most)\n", whole)
	fmt.Fprintf(&table, "the MiB's cost (cat less true), tool ÷ bash: %.2f\n", mib)
	b.Logf("%d calls each\n%s", len(times[0]), table.String())
}

// percentile is the p-th percentile of d in milliseconds (nearest rank).
func percentile(d []time.Duration, p int) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, max(0, (p*len(s)+99)/100-1))].Microseconds()) / 1000
}
