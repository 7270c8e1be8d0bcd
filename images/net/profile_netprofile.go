//go:build netprofile

package main

// A diagnostic build (`go build -tags netprofile`, never the shipped one): CPU profiles of net
// under the benchmark's load (testkit/benchprofile).
import _ "github.com/sharness-ai/sharness/testkit/benchprofile"
