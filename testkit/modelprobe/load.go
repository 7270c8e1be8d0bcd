package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/sharness-ai/sharness/testkit/loadgen"
)

// shardTunnels is the most tunnel workers one process runs: the agent's file limit is 1024 per
// process (RLIMIT_NOFILE), and each tunnel holds a descriptor.
const shardTunnels = 400

// load runs the soak's load (testkit/loadgen) from the agent's seat: the configuration as JSON on
// stdin, the endpoints from the agent's environment. Tunnel workers beyond shardTunnels run in
// child processes of this same program (-load-shard), each with its own file limit; the merged
// report is printed as one JSON line. Exit 0 when the run completed (the e2e suite judges the
// counts), 2 when it could not run.
func load(shard bool) {
	var cfg loadgen.Config
	if err := json.NewDecoder(io.LimitReader(os.Stdin, 1<<20)).Decode(&cfg); err != nil {
		fail("-load: the configuration on stdin: %v", err)
	}
	fromEnv(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+2*time.Minute)
	defer cancel()
	var shards []*loadgen.Report
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := cfg.Tunnels
	if !shard {
		for left := cfg.Tunnels - shardTunnels; left > 0; left -= shardTunnels {
			sub := loadgen.Config{Duration: cfg.Duration, Tunnels: min(left, shardTunnels), BulkBytes: cfg.BulkBytes,
				Backoff: cfg.Backoff, OpTimeout: cfg.OpTimeout, Proxy: cfg.Proxy}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := runShard(ctx, sub)
				if err != nil {
					fail("-load: a shard: %v", err)
				}
				mu.Lock()
				shards = append(shards, r)
				mu.Unlock()
			}()
		}
		cfg.Tunnels = min(cfg.Tunnels, shardTunnels)
	}
	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		fail("%v", err)
	}
	wg.Wait()
	rep.Merge(shards...)
	if !shard {
		rep.Config.Tunnels = total // the parent's own share was the first shardTunnels
		rep.Finish()
	}
	json.NewEncoder(os.Stdout).Encode(rep)
}

// once makes one operation of kind with the configuration on stdin (testkit/loadgen.Once) and
// prints its result as one JSON line: the fault suite's probe.
func once(kind string) {
	var cfg loadgen.Config
	if err := json.NewDecoder(io.LimitReader(os.Stdin, 1<<20)).Decode(&cfg); err != nil {
		fail("-once: the configuration on stdin: %v", err)
	}
	fromEnv(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.OpTimeout+30*time.Second)
	defer cancel()
	r, err := loadgen.Once(ctx, cfg, kind)
	if err != nil {
		fail("%v", err)
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

func fromEnv(cfg *loadgen.Config) {
	cfg.Proxy = cmp.Or(cfg.Proxy, os.Getenv("HTTP_PROXY"))
	cfg.LLM = cmp.Or(cfg.LLM, os.Getenv("ANTHROPIC_BASE_URL"))
	cfg.BashMCP = cmp.Or(cfg.BashMCP, os.Getenv("SHARNESS_AI_BASH_MCP"))
	cfg.FSURL = cmp.Or(cfg.FSURL, os.Getenv("SHARNESS_AI_FS_URL"))
	cfg.CAPEM = os.Getenv("SHARNESS_PROBE_CA_PEM")
}

func runShard(ctx context.Context, cfg loadgen.Config) (*loadgen.Report, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	in, _ := json.Marshal(cfg)
	cmd := exec.CommandContext(ctx, self, "-load-shard")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -load-shard: %w", self, err)
	}
	var r loadgen.Report
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("the shard's report: %w", err)
	}
	return &r, nil
}
