// Command sharness-modelprobe tries the model path's side doors from where it runs, and prints
// one JSON line per attempt in the side-door suite's format (testkit/sidedoor), then a summary.
//
//	sharness-modelprobe -model [-key-stdin]   from the agent's seat: requests llm must refuse,
//	                                          each for its named reason, and one it must answer
//	sharness-modelprobe -call ok|kms-down     one ordinary request, expected answered, or
//	                                          refused because kms is away
//	sharness-modelprobe -kms                  from a seat with a Workload API socket on the
//	                                          kms edge: requests kms must refuse (kms.go)
//	sharness-modelprobe -load                 the soak's load (testkit/loadgen; load.go): its
//	                                          configuration as JSON on stdin, one JSON report out
//	sharness-modelprobe -once KIND            one operation of a load kind (tunnel-new, tunnel-refused,
//	                                          llm-stream, bash-call, fs-write): the fault suite's probe
//
// With -key-stdin it reads the stack's real API key from standard input (the e2e suite has it;
// the agent never does) and plants it, in several encodings, in tool results that llm must refuse
// before they reach the model. It lives in the agent image beside sharness-probe.
//
// It proves only what it tries: llm's refusals of these requests, not of every request.
//
// Exit codes: 0 every door ok, 1 a door failed, 2 usage or configuration error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/testkit/sidedoor"
)

func main() {
	model := flag.Bool("model", false, "try the model doors through llm ($ANTHROPIC_BASE_URL)")
	keyStdin := flag.Bool("key-stdin", false, "with -model: read the stack's real key from stdin and plant it")
	call := flag.String("call", "", "make one ordinary request and expect: ok or kms-down")
	kmsDoors := flag.Bool("kms", false, "try the kms doors with this seat's SVID")
	loadRun := flag.Bool("load", false, "generate the soak's load (configuration on stdin) and print its report")
	loadShard := flag.Bool("load-shard", false, "a shard of -load's tunnels (run by -load itself)")
	onceKind := flag.String("once", "", "make one operation of this load kind (configuration on stdin) and print its result")
	flag.Parse()
	if *loadRun || *loadShard {
		load(*loadShard)
		return
	}
	if *onceKind != "" {
		once(*onceKind)
		return
	}
	base := os.Getenv("ANTHROPIC_BASE_URL")
	var doors []sidedoor.Door
	switch {
	case *model && base != "":
		key := ""
		if *keyStdin {
			b, err := io.ReadAll(io.LimitReader(os.Stdin, 4096))
			if err != nil || len(strings.TrimSpace(string(b))) < 16 {
				fail("read the key from stdin: %v (%d bytes)", err, len(b))
			}
			key = strings.TrimSpace(string(b))
		}
		doors = modelDoors(base, key)
	case *call != "" && base != "":
		doors = []sidedoor.Door{callDoor(base, *call)}
	case *kmsDoors:
		d, err := kmsDoorsFromEnv(os.Getenv)
		if err != nil {
			fail("%v", err)
		}
		doors = d
	default:
		fail("usage: sharness-modelprobe -model [-key-stdin] | -call ok|kms-down | -kms (ANTHROPIC_BASE_URL for -model and -call)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	sum, err := sidedoor.Report(ctx, os.Stdout, sidedoor.Group{Doors: doors, Par: 4})
	cancel()
	if err != nil || sum.Failed > 0 {
		os.Exit(1)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sharness-modelprobe: "+format+"\n", args...)
	os.Exit(2)
}
