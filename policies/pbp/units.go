package pbp

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/sharness-ai/sharness/internal/strictyaml"
)

var sizePattern = regexp.MustCompile(`^([1-9][0-9]{0,12})(Ki|Mi|Gi)?$`)

// ParseSize reads a size such as "64Mi" (units Ki, Mi, Gi; no fractions) as bytes, below 2^53.
func ParseSize(s string) (int64, error) {
	g := sizePattern.FindStringSubmatch(s)
	if g == nil {
		return 0, fmt.Errorf("size %q must be a whole number with an optional unit Ki, Mi or Gi (e.g. \"64Mi\")", s)
	}
	n, _ := strconv.ParseInt(g[1], 10, 64)
	shift := map[string]int{"": 0, "Ki": 10, "Mi": 20, "Gi": 30}[g[2]]
	if n > (strictyaml.MaxSafeInt-1)>>shift {
		return 0, fmt.Errorf("size %q is too large (the limit is 2^53 bytes)", s)
	}
	return n << shift, nil
}

var durationPattern = regexp.MustCompile(`^([1-9][0-9]{0,8})(s|m|h)$`)

// ParseDuration reads a duration such as "30m" (units s, m, h; no fractions) as seconds.
func ParseDuration(s string) (int64, error) {
	g := durationPattern.FindStringSubmatch(s)
	if g == nil {
		return 0, fmt.Errorf("duration %q must be a whole number of s, m or h (e.g. \"30m\")", s)
	}
	n, _ := strconv.ParseInt(g[1], 10, 64)
	return n * map[string]int64{"s": 1, "m": 60, "h": 3600}[g[2]], nil
}
