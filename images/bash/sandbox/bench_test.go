package sandbox

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
)

// BenchmarkSandbox measures, interleaved in one run so that a busy host slows every variant
// alike, the wall time of one command: plain bash (the baseline), unshare(1) and bwrap (the
// named alternatives, each skipped with a note when not installed), and this package's
// sandbox for `true` and for `cat` of a 1 MB file. It reports each variant's p50 and p90 in
// milliseconds, the cost each adds to plain bash at p50, and our added cost over unshare's and
// bwrap's. The init here is the test binary; sharness-bash's is larger (hack/bench-bash.sh).
//
//	go test -run '^$' -bench BenchmarkSandbox -benchtime 200x ./images/bash/sandbox
func BenchmarkSandbox(b *testing.B) {
	s := realSandbox(b)
	ws := workspace(b)
	if err := os.WriteFile(filepath.Join(ws, "1mb"), make([]byte, 1<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ours := func(command string) func() error {
		return func() error {
			res, err := s.Run(ctx, Spec{Command: command, Profile: Analyse, Workspace: ws})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			return err
		}
	}
	// The plain commands' output is read through a pipe, as ours is.
	command := func(name string, args ...string) func() error {
		return func() error {
			cmd := exec.Command(name, args...)
			cmd.Dir = ws
			_, err := cmd.Output()
			return err
		}
	}
	variants := []struct {
		name string
		run  func() error
	}{
		{"bash", command("bash", "-c", "true")},
		{"unshare", command("unshare", "--user", "--map-root-user", "--pid", "--net", "--mount", "--fork", "bash", "-c", "true")},
		{"bwrap", command("bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "bash", "-c", "true")},
		{"ours-true", ours("true")},
		{"bash-cat-1MB", command("bash", "-c", "cat 1mb")},
		{"ours-cat-1MB", ours("cat 1mb")},
	}
	// Each variant's added cost is over the plain bash running the same command.
	baseline := []int{0, 0, 0, 0, 4, 4}
	times := make([][]time.Duration, len(variants))
	skip := make([]bool, len(variants))
	for i, v := range variants {
		if err := v.run(); err != nil {
			skip[i] = true
			b.Logf("%s: not measured: %v", v.name, err)
		}
	}
	if skip[0] || skip[3] || skip[4] {
		b.Fatal("the baseline or our sandbox does not run")
	}
	b.ResetTimer()
	for b.Loop() {
		for i, v := range variants {
			if skip[i] {
				continue
			}
			start := time.Now()
			if err := v.run(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(variants))
	var table strings.Builder
	for i, v := range variants {
		if skip[i] {
			continue
		}
		p50[i], _ = percentile(times[i], 50)
		p90, _ := percentile(times[i], 90)
		b.ReportMetric(p50[i], v.name+"-p50-ms")
		b.ReportMetric(p90, v.name+"-p90-ms")
		fmt.Fprintf(&table, "%-14s p50 %7.2f ms  p90 %7.2f ms  added %7.2f ms\n", v.name, p50[i], p90, p50[i]-p50[baseline[i]])
	}
	added := func(i int) float64 { return p50[i] - p50[baseline[i]] }
	b.ReportMetric(added(3), "added-ours-true-ms")
	b.ReportMetric(added(5), "added-ours-cat-ms")
	for _, base := range []int{1, 2} {
		if !skip[base] && added(base) > 0 {
			r := added(3) / added(base)
			b.ReportMetric(r, "added-ours÷"+variants[base].name)
			fmt.Fprintf(&table, "added cost, ours-true ÷ %s: %.2f\n", variants[base].name, r)
		}
	}
	b.Logf("%d runs each\n%s", len(times[0]), table.String())
}

// percentile is the p-th percentile of d in milliseconds (nearest rank).
func percentile(d []time.Duration, p int) (float64, bool) {
	if len(d) == 0 {
		return 0, false
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, max(0, (p*len(s)+99)/100-1))
	return float64(s[i].Microseconds()) / 1000, true
}
