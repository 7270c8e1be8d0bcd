// Command worldca makes the offline world's throwaway TLS material before the stack starts and
// prints it as shell assignments for compose/world.yml:
//
//	eval "$(go run ./testkit/worldca)"
//
// One CA (whose key is dropped before this returns) signs one leaf for the world's test hosts and
// for api.anthropic.com (the offline model). The world and the model get the leaf and its key; llm
// and the agent's probe get the CA certificate. Everything goes by environment because a shared
// volume would be a host mount the compiled policies do not list, and the runtime shim refuses it.
//
// It is test infrastructure: never trust this CA outside a test.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sharness-ai/sharness/internal/throwawayca"
)

// names are the hosts the world (testkit/world) and the model (testkit/model) answer for.
var names = []string{"allowed.sharness.test", "denied.sharness.test", "api.anthropic.com"}

func main() {
	p, err := throwawayca.IssuePEM("sharness offline world throwaway CA", names, time.Now())
	if err != nil {
		fmt.Fprintln(os.Stderr, "worldca:", err)
		os.Exit(1)
	}
	for _, kv := range [][2]string{
		{"SHARNESS_WORLD_CA_PEM", p.CA},
		{"SHARNESS_WORLD_TLS_CERT", p.Chain},
		{"SHARNESS_WORLD_TLS_KEY", p.Key},
	} {
		// PEM holds no single quote, so single quotes carry it to the shell unchanged.
		if strings.Contains(kv[1], "'") {
			fmt.Fprintln(os.Stderr, "worldca: unexpected quote in", kv[0])
			os.Exit(1)
		}
		fmt.Printf("export %s='%s'\n", kv[0], kv[1])
	}
}
