package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// report is what one run measured, with the ratios the issue asks for.
type report struct {
	Date     string                      `json:"date"`
	Host     map[string]string           `json:"host"`
	Settings map[string]any              `json:"settings"`
	Peers    []peerInfo                  `json:"peers"`
	Metrics  []metric                    `json:"metrics"`
	Results  results                     `json:"results"`
	Ratios   map[string]map[string]ratio `json:"ratios"`     // metric → peer → its value over the references'
	CPU      map[string]map[string]ratio `json:"cpu_ratios"` // the same for the proxy's CPU time per unit
	Goals    []goal                      `json:"goals"`
	NetLog   map[string]map[string]int   `json:"net_decisions"` // net peer → "allow rule" → count
	Elapsed  string                      `json:"elapsed"`
}

type peerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Note    string `json:"note,omitempty"`
}

// ratio is a peer's value over the stdlib proxy's and over smokescreen's (0: no reference).
// For latencies a ratio above 1 is slower.
type ratio struct {
	ToStdlib      float64 `json:"to_stdlib,omitempty"`
	ToSmokescreen float64 `json:"to_smokescreen,omitempty"`
}

type goal struct {
	Peer   string  `json:"peer"`
	Text   string  `json:"text"`
	Ratio  float64 `json:"ratio"`
	Met    bool    `json:"met"`
	Order  order   `json:"order"`
	Errors bool    `json:"errors"` // the peer had failed requests in this figure
}

// order is how a peer compares with a reference round by round. Within a round the peers are
// measured one after the other, so round i of one and round i of the other saw the same
// machine; a sign test over those pairs says whether the order is settled: under "no
// difference" a peer wins each round with probability one half, and P is the chance of a
// split at least this lopsided (two-sided). A lead or a lag counts when P ≤ 0.05, which takes
// six or more rounds without a loss.
type order struct {
	Wins   int     `json:"wins"`   // rounds the peer did better
	Losses int     `json:"losses"` // rounds it did worse (equal rounds count as neither)
	Rounds int     `json:"rounds"` // paired rounds; 0 when the rounds cannot be paired
	P      float64 `json:"p"`
}

func (o order) ahead() bool  { return o.Wins > o.Losses && o.P <= 0.05 }
func (o order) behind() bool { return o.Losses > o.Wins && o.P <= 0.05 }

func (o order) String() string {
	switch {
	case o.Rounds == 0:
		return "rounds not paired (failed rounds): order not settled"
	case o.ahead():
		return fmt.Sprintf("ahead in %d of %d rounds (sign test p=%.3f)", o.Wins, o.Rounds, o.P)
	case o.behind():
		return fmt.Sprintf("behind in %d of %d rounds (sign test p=%.3f)", o.Losses, o.Rounds, o.P)
	}
	if o.Rounds < settleRounds {
		return fmt.Sprintf("ahead in %d, behind in %d of %d rounds: too few rounds to settle an order (%d needed)", o.Wins, o.Losses, o.Rounds, settleRounds)
	}
	return fmt.Sprintf("ahead in %d, behind in %d of %d rounds: a tie within the noise (sign test p=%.2f)", o.Wins, o.Losses, o.Rounds, o.P)
}

// settleRounds is the fewest rounds in which a sign test can settle an order (p = 1/32).
const settleRounds = 6

// compare pairs a's rounds with ref's. Rounds pair only when both have one value for every
// round measured (a failed round leaves a gap, and the values after it would pair wrongly).
func compare(a, ref *sample, higherIsBetter bool) order {
	if len(a.Values) == 0 || len(a.Values) != a.Rounds || len(ref.Values) != ref.Rounds || a.Rounds != ref.Rounds {
		return order{P: 1}
	}
	o := order{Rounds: a.Rounds}
	for i, v := range a.Values {
		switch w := ref.Values[i]; {
		case v == w:
		case (v > w) == higherIsBetter:
			o.Wins++
		default:
			o.Losses++
		}
	}
	o.P = signTest(o.Wins, o.Losses)
	return o
}

// signTest is the two-sided sign test's p-value for w wins and l losses.
func signTest(w, l int) float64 {
	n, k := w+l, max(w, l)
	if n == 0 {
		return 1
	}
	tail, c := 0.0, 1.0 // c = binomial(n, i), from i = 0
	for i := 0; i <= n; i++ {
		if i >= k {
			tail += c
		}
		c = c * float64(n-i) / float64(i+1)
	}
	return min(1, 2*tail/math.Pow(2, float64(n)))
}

// newGoal compares s to the reference ref (ratio is s's median over ref's). A goal of being
// ahead is met when the lead is settled; a goal of at least matching ("≥") when there were
// rounds enough to settle an order and s is not settled behind.
func newGoal(peer, text string, ratio float64, higherIsBetter bool, s, ref *sample) goal {
	o := compare(s, ref, higherIsBetter)
	met := o.ahead()
	if strings.Contains(text, "≥") {
		met = o.Rounds >= settleRounds && !o.behind()
	}
	return goal{peer, text, ratio, met, o, s.Errors > 0}
}

func buildReport(cfg config, peers []*peer, res results, elapsed time.Duration) *report {
	r := &report{Date: time.Now().UTC().Format(time.RFC3339), Host: hostInfo(), Metrics: metrics, Results: res,
		Ratios: map[string]map[string]ratio{}, CPU: map[string]map[string]ratio{}, NetLog: map[string]map[string]int{}, Elapsed: elapsed.Round(time.Second).String(),
		Settings: map[string]any{"rounds": cfg.rounds, "clients": cfg.clients, "window": cfg.dur.String(), "bulk_bytes": cfg.bulk, "bulk_raw_bytes": cfg.bulkRaw,
			"latency_samples": cfg.n, "source": cfg.src.String(), "bulk_rounds": cfg.bulkRounds}}
	for _, p := range peers {
		r.Peers = append(r.Peers, peerInfo{p.name, p.version, p.note})
		if p.name == peerNet || p.name == peerNetNoLimit {
			r.NetLog[p.name] = decisions(p.log)
		}
	}
	for _, m := range metrics {
		for _, s := range res[m.Key] {
			if len(s.Values) > 0 && !strings.HasPrefix(m.Key, "latency") {
				v := slices.Sorted(slices.Values(s.Values))
				s.Value = v[len(v)/2]
				if len(v)%2 == 0 {
					s.Value = (v[len(v)/2-1] + v[len(v)/2]) / 2
				}
			}
		}
		r.Ratios[m.Key], r.CPU[m.Key] = map[string]ratio{}, map[string]ratio{}
		for name, s := range res[m.Key] {
			r.Ratios[m.Key][name] = ratio{div(s.Value, res, m.Key, peerStdlib), div(s.Value, res, m.Key, peerSmokescreen)}
			r.CPU[m.Key][name] = ratio{cpuRatio(res[m.Key], name, peerStdlib), cpuRatio(res[m.Key], name, peerSmokescreen)}
		}
	}
	for _, n := range []string{peerNet, peerNetNoLimit} {
		for _, key := range []string{"bulk", "bulk_raw"} {
			if res[key][n] != nil && res[key][peerStdlib] != nil {
				r.Goals = append(r.Goals, newGoal(n, key+" throughput ≥ the stdlib proxy's", r.Ratios[key][n].ToStdlib, true,
					res[key][n], res[key][peerStdlib]))
			}
		}
		for _, m := range metrics {
			s := res[m.Key][n]
			if s == nil || res[m.Key][peerSmokescreen] == nil {
				continue
			}
			r.Goals = append(r.Goals, newGoal(n, "ahead of smokescreen: "+m.Key, r.Ratios[m.Key][n].ToSmokescreen, m.HigherIsBetter,
				s, res[m.Key][peerSmokescreen]))
		}
	}
	return r
}

func div(v float64, res results, key, ref string) float64 {
	if s := res[key][ref]; s != nil && s.Value > 0 {
		return v / s.Value
	}
	return 0
}

// decisions counts net's canonical decision lines by verdict and rule.
func decisions(log string) map[string]int {
	out := map[string]int{}
	f, err := os.Open(log)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg   string `json:"msg"`
			Allow bool   `json:"allow"`
			Rule  string `json:"rule"`
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "decision" {
			continue
		}
		k := "refuse " + l.Rule
		if l.Allow {
			k = "allow"
			if l.Error != "" {
				k = "allow, then failed: " + l.Error
			}
		}
		out[k]++
	}
	return out
}

func hostInfo() map[string]string {
	h := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h["kernel"] = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nnetbench: net against a direct connection, a minimal stdlib proxy and smokescreen; one run, one machine\n")
	fmt.Fprintf(w, "host: %s, %s CPUs, %s, %s; settings: %v; took %s\n\n", r.Host["cpu"], r.Host["cpus"], r.Host["kernel"], r.Host["go"], r.Settings, r.Elapsed)
	for _, p := range r.Peers {
		fmt.Fprintf(w, "  %-12s %s: %s\n", p.Name, p.Version, p.Note)
	}
	for _, m := range r.Metrics {
		dir := "higher is better"
		if !m.HigherIsBetter {
			dir = "lower is better"
		}
		fmt.Fprintf(w, "\n%s, %s (%s; median of rounds)\n", m.Title, m.Unit, dir)
		per := "µs/req"
		if m.Unit == "MB/s" {
			per = "µs/MB"
		}
		fmt.Fprintf(w, "  %-12s %10s %9s %13s  %-30s %7s %7s %8s %9s %14s\n", "peer", "value", "×stdlib", "×smokescreen", "rounds", "ok", "errors", "dns/req", "conns/req", "proxy cpu "+per)
		for _, p := range r.Peers {
			s := r.Results[m.Key][p.Name]
			if s == nil {
				continue
			}
			ra := r.Ratios[m.Key][p.Name]
			rounds := make([]string, len(s.Values))
			for i, v := range s.Values {
				rounds[i] = num(v)
			}
			dns, conns := "-", "-"
			if m.Unit != "MB/s" && s.OK+s.Errors > 0 {
				dns = fmt.Sprintf("%.2f", float64(s.DNSQueries)/float64(s.OK+s.Errors))
				conns = fmt.Sprintf("%.2f", float64(s.Upstream)/float64(s.OK+s.Errors))
			}
			cpu := "-"
			if s.CPUPer > 0 {
				cpu = num(s.CPUPer)
			}
			fmt.Fprintf(w, "  %-12s %10s %9s %13s  %-30s %7d %7d %8s %9s %14s%s\n", p.Name, num(s.Value), times(ra.ToStdlib), times(ra.ToSmokescreen),
				strings.Join(rounds, " "), s.OK, s.Errors, dns, conns, cpu, kinds(s.ErrorKinds))
		}
	}
	fmt.Fprintf(w, "\ngoals (issue 3): net ≥ the stdlib proxy's throughput, and ahead of smokescreen on every figure\n")
	for _, g := range r.Goals {
		verdict := "not met: "
		if g.Met {
			verdict = "met: "
		}
		verdict += g.Order.String()
		if g.Errors {
			verdict += " (with failed requests, see above)"
		}
		fmt.Fprintf(w, "  %-12s %-44s %6s  %s\n", g.Peer, g.Text, times(g.Ratio), verdict)
	}
	r.printCPU(w)
	for _, n := range []string{peerNet, peerNetNoLimit} {
		if d, ok := r.NetLog[n]; ok {
			keys := slices.Sorted(maps.Keys(d))
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = fmt.Sprintf("%s: %d", k, d[k])
			}
			fmt.Fprintf(w, "\n%s's decision log: %s", n, strings.Join(parts, "; "))
		}
	}
	fmt.Fprintln(w)
}

// printCPU is the proxies' CPU time per unit of work, the figure other load on the machine
// disturbs least, with each net's ratio to the references.
func (r *report) printCPU(w io.Writer) {
	var cols []string
	for _, p := range r.Peers {
		if p.Name != peerDirect {
			cols = append(cols, p.Name)
		}
	}
	fmt.Fprintf(w, "\nproxy CPU time (user+system, all threads) per request, per MB for bulk, µs (lower is better)\n  %-14s", "figure")
	for _, c := range cols {
		fmt.Fprintf(w, " %12s", c)
	}
	nets := []string{}
	for _, n := range []string{peerNet, peerNetNoLimit} {
		if slices.Contains(cols, n) {
			nets = append(nets, n)
			fmt.Fprintf(w, " %20s %20s", n+" ×stdlib", n+" ×smokescreen")
		}
	}
	fmt.Fprintln(w)
	for _, m := range r.Metrics {
		if m.Key == "latency_p99" { // the same requests as p50
			continue
		}
		label := m.Key
		if m.Key == "latency_p50" {
			label = "latency"
		}
		fmt.Fprintf(w, "  %-14s", label)
		for _, c := range cols {
			v := "-"
			if s := r.Results[m.Key][c]; s != nil && s.CPUPer > 0 {
				v = num(s.CPUPer)
			}
			fmt.Fprintf(w, " %12s", v)
		}
		for _, n := range nets {
			ra := r.CPU[m.Key][n]
			fmt.Fprintf(w, " %20s %20s", times(ra.ToStdlib), times(ra.ToSmokescreen))
		}
		fmt.Fprintln(w)
	}
}

func cpuRatio(res map[string]*sample, a, b string) float64 {
	if res[a] == nil || res[b] == nil || res[b].CPUPer == 0 {
		return 0
	}
	return res[a].CPUPer / res[b].CPUPer
}

func num(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func times(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func kinds(k map[string]int) string {
	if len(k) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(k)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", name, k[name]))
	}
	return "  (" + strings.Join(parts, ", ") + ")"
}

func (r *report) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
