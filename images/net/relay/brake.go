package relay

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/time/rate"
)

// Brake is a per-caller flood brake: each caller may make Rate requests a second, Burst at
// once. It is a brake, not a throttle: real work stays far under it, and a caller over it is
// refused (429) rather than slowed.
type Brake struct {
	Rate  rate.Limit
	Burst int
}

// ParseBrake parses "<requests per second>/<burst>", both positive and finite ("2000/4000"):
// a brake can be set, never switched off.
func ParseBrake(s string) (Brake, error) {
	r, b, _ := strings.Cut(s, "/")
	perSecond, err1 := strconv.ParseFloat(r, 64)
	burst, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || !(perSecond > 0 && perSecond < float64(rate.Inf)) || burst < 1 {
		return Brake{}, fmt.Errorf("rate per caller %q is not <requests per second>/<burst>, both positive and finite", s)
	}
	return Brake{Rate: rate.Limit(perSecond), Burst: burst}, nil
}

func (b Brake) String() string {
	return strconv.FormatFloat(float64(b.Rate), 'g', -1, 64) + "/" + strconv.Itoa(b.Burst)
}

// Limiter is a fresh token bucket for one caller, full.
func (b Brake) Limiter() *rate.Limiter { return rate.NewLimiter(b.Rate, b.Burst) }
