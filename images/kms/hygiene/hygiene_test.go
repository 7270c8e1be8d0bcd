package hygiene

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const childEnv = "SHARNESS_AI_HYGIENE_TEST_CHILD"

// TestHarden runs Harden in a re-executed child, since it changes the process for good (not
// dumpable, maybe all memory locked), and checks every measure reports "ok" or a degradation.
// It needs no root: without privileges the report says what was lost.
func TestHarden(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		h := Harden()
		mem, how, err := SecretPage(32)
		if err == nil {
			copy(mem, "key")
			h["memfd_secret"] = how
			h["readback"] = string(mem[:3])
			Free(mem)
		}
		json.NewEncoder(os.Stdout).Encode(h)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHarden$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var h Report
	if err := json.Unmarshal(out[:strings.IndexByte(string(out), '\n')+1], &h); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	for _, k := range []string{"not_dumpable", "no_core", "mlockall", "memfd_secret"} {
		if v := h[k]; v != "ok" && !strings.HasPrefix(v, "degraded: ") {
			t.Errorf("%s = %q, want ok or a degradation", k, v)
		}
	}
	if h["readback"] != "key" {
		t.Errorf("secret memory read back %q", h["readback"])
	}
	t.Logf("hygiene here: %v", h)
}
