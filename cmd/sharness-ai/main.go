// Command sharness-ai is the operator's and CI's tool: compile, hash, sign and verify policies.
package main

import (
	"os"

	"github.com/sharness-ai/sharness/host/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
