//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharness-ai/sharness/testkit/loadgen"
)

// What TestSoak and TestFaults share: the load generator run from the agent's seat
// (sharness-modelprobe -load, testkit/loadgen), what each component's container holds as read on
// the host (its cgroup and its processes' /proc), and the decisions each audit log counts.

// loadComponents are the components measured and broken: every one with an audit log.
var loadComponents = recordComponents

// runLoad runs the load generator in a one-off agent container and returns its report.
func runLoad(t *testing.T, ctx context.Context, s *stack, cfg loadgen.Config) *loadgen.Report {
	t.Helper()
	in, _ := json.Marshal(cfg)
	out, err := s.run(ctx, string(in), "--entrypoint", "/sharness-modelprobe", "agent", "-load")
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte(`{"config"`)) {
			var r loadgen.Report
			if jerr := json.Unmarshal(line, &r); jerr != nil {
				t.Fatalf("the load generator's report: %v\n%s", jerr, line)
			}
			return &r
		}
	}
	t.Fatalf("the load generator printed no report (%v):\n%s", err, clipOut(out))
	return nil
}

func clipOut(b []byte) string {
	if len(b) > 8000 {
		return string(b[:4000]) + "\n…\n" + string(b[len(b)-4000:])
	}
	return string(b)
}

// holding is what one component's container holds, read on the host.
type holding struct {
	MemBytes    int64 `json:"mem_bytes"`      // usage now (cgroup)
	MemPeak     int64 `json:"mem_peak_bytes"` // the cgroup's high-water mark
	MemLimit    int64 `json:"mem_limit_bytes"`
	MemFailures int64 `json:"mem_limit_hits"` // times usage hit the limit (v1 failcnt, v2 events max)
	OOMKills    int64 `json:"oom_kills"`
	Pids        int64 `json:"pids"`
	PidsLimit   int64 `json:"pids_limit"`
	PidsRefused int64 `json:"pids_refused"` // forks refused at the limit (pids.events max)
	FDs         int   `json:"fds"`          // open descriptors of every process in the container
	Threads     int   `json:"threads"`      // OS threads of every process (goroutines are not exposed)
	RSSKB       int64 `json:"rss_kb"`
	// TCP counts the container's TCP sockets by state and peer ("ESTABLISHED 10.214": the
	// egress network, "10.213": the edges), read from its network namespace.
	TCP map[string]int `json:"tcp,omitempty"`
	// FDKinds counts the descriptors by what they are: "socket", "pipe", "anon_inode:[eventpoll]",
	// a file's folder; UDP the namespace's UDP sockets.
	FDKinds map[string]int `json:"fd_kinds,omitempty"`
	UDP     int            `json:"udp"`
	// ListenDrops is the namespace's TcpExt ListenDrops: connection attempts dropped because a
	// listener's accept queue was full (a caller's dial then times out).
	ListenDrops int64 `json:"listen_drops"`
}

// containerID is the id of service's running container.
// It asks the engine by compose's labels, not compose itself (which records the session first:
// the sampler asks every second).
func containerID(ctx context.Context, _ *stack, service string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+project,
		"--filter", "label=com.docker.compose.service="+service, "--filter", "label=com.docker.compose.oneoff=False").Output()
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" {
		return "", fmt.Errorf("docker ps: no running %s (%v)", service, err)
	}
	return strings.Fields(id)[0], nil
}

// hold reads what service's container holds: its cgroup's memory and pids counters (v1 or v2),
// and, for every process in it, its descriptors, threads and resident memory.
func hold(t *testing.T, ctx context.Context, s *stack, service string) holding {
	t.Helper()
	h, err := tryHold(ctx, s, service)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func tryHold(ctx context.Context, s *stack, service string) (holding, error) {
	id, err := containerID(ctx, s, service)
	if err != nil {
		return holding{}, err
	}
	pidOut, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Pid}}", id).Output()
	pid := strings.TrimSpace(string(pidOut))
	if err != nil || pid == "0" {
		return holding{}, fmt.Errorf("docker inspect %s: %v (pid %q)", service, err, pid)
	}
	paths, err := cgroupPaths(pid)
	if err != nil {
		return holding{}, err
	}
	var h holding

	num := func(ctrl, file string) int64 {
		b, err := os.ReadFile(filepath.Join(paths[ctrl], file))
		if err != nil {
			return -1
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return -1
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	keyed := func(ctrl, file, key string) int64 {
		b, _ := os.ReadFile(filepath.Join(paths[ctrl], file))
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, " "); ok && k == key {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
		return 0
	}
	if _, v2 := paths[""]; v2 && paths["memory"] == "" {
		h.MemBytes, h.MemPeak, h.MemLimit = num("", "memory.current"), num("", "memory.peak"), num("", "memory.max")
		h.MemFailures, h.OOMKills = keyed("", "memory.events", "max"), keyed("", "memory.events", "oom_kill")
		h.Pids, h.PidsLimit, h.PidsRefused = num("", "pids.current"), num("", "pids.max"), keyed("", "pids.events", "max")
	} else {
		h.MemBytes, h.MemPeak, h.MemLimit = num("memory", "memory.usage_in_bytes"), num("memory", "memory.max_usage_in_bytes"), num("memory", "memory.limit_in_bytes")
		h.MemFailures, h.OOMKills = num("memory", "memory.failcnt"), keyed("memory", "memory.oom_control", "oom_kill")
		h.Pids, h.PidsLimit, h.PidsRefused = num("pids", "pids.current"), num("pids", "pids.max"), keyed("pids", "pids.events", "max")
	}
	h.TCP = tcpStates(pid)
	h.ListenDrops = netstat(pid, "TcpExt", "ListenDrops")
	procs, _ := os.ReadFile(filepath.Join(cmpPath(paths["pids"], paths[""]), "cgroup.procs"))
	h.FDKinds = map[string]int{}
	if b, err := os.ReadFile("/proc/" + pid + "/net/udp"); err == nil {
		h.UDP = max(strings.Count(string(b), "\n")-1, 0)
	}
	for _, p := range strings.Fields(string(procs)) {
		fds, _ := os.ReadDir("/proc/" + p + "/fd")
		h.FDs += len(fds)
		for _, fd := range fds {
			target, err := os.Readlink("/proc/" + p + "/fd/" + fd.Name())
			switch {
			case err != nil:
			case strings.HasPrefix(target, "socket:"):
				h.FDKinds["socket"]++
			case strings.HasPrefix(target, "pipe:"):
				h.FDKinds["pipe"]++
			case strings.HasPrefix(target, "/"):
				h.FDKinds[filepath.Dir(target)]++
			default:
				h.FDKinds[target]++
			}
		}
		st, _ := os.ReadFile("/proc/" + p + "/status")
		sc := bufio.NewScanner(bytes.NewReader(st))
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
			switch k {
			case "Threads":
				n, _ := strconv.Atoi(v)
				h.Threads += n
			case "VmRSS":
				n, _ := strconv.ParseInt(v, 10, 64)
				h.RSSKB += n
			}
		}
	}
	return h, nil
}

// tcpStates counts the TCP sockets of pid's network namespace by state and by the first two
// octets of the peer's IPv4 address (listeners left out).
func tcpStates(pid string) map[string]int {
	names := map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
		"06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}
	n := map[string]int{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile("/proc/" + pid + "/net/" + f)
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) < 4 || fs[3] == "0A" {
				continue
			}
			peer := "other"
			if addr, _, ok := strings.Cut(fs[2], ":"); ok && len(addr) == 8 {
				peer = fmt.Sprintf("%d.%d", hexByte(addr[6:8]), hexByte(addr[4:6]))
			}
			n[names[fs[3]]+" "+peer]++
		}
	}
	return n
}

func hexByte(s string) int {
	v, _ := strconv.ParseUint(s, 16, 8)
	return int(v)
}

func cmpPath(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// cgroupPaths maps each cgroup v1 controller of pid (and "" for the v2 group) to its folder
// under /sys/fs/cgroup.
func cgroupPaths(pid string) (map[string]string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read the cgroups of pid %s: %w", pid, err)
	}
	paths := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			paths[""] = filepath.Join("/sys/fs/cgroup", parts[2])
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/unified", parts[2])); err == nil {
				paths[""] = filepath.Join("/sys/fs/cgroup/unified", parts[2])
			}
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			paths[ctrl] = filepath.Join("/sys/fs/cgroup", ctrl, parts[2])
		}
	}
	return paths, nil
}

// sampler reads every component's holding each interval until stopped, keeping the highest
// descriptors, threads and pids seen.
type sampler struct {
	stop chan struct{}
	done chan map[string]holding
}

func startSampler(ctx context.Context, s *stack, every time.Duration) *sampler {
	sm := &sampler{stop: make(chan struct{}), done: make(chan map[string]holding, 1)}
	go func() {
		peak := map[string]holding{}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for _, c := range loadComponents {
				h, err := tryHold(ctx, s, c)
				if err != nil { // a component that is down (a fault) is skipped
					continue
				}
				p := peak[c]
				p.FDs, p.Threads, p.Pids = max(p.FDs, h.FDs), max(p.Threads, h.Threads), max(p.Pids, h.Pids)
				p.RSSKB = max(p.RSSKB, h.RSSKB)
				peak[c] = p
			}
			select {
			case <-sm.stop:
				sm.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return sm
}

func (sm *sampler) finish() map[string]holding {
	close(sm.stop)
	return <-sm.done
}

// decisions counts each component's audit lines by action and decision ("egress/allow"), and
// net's egress lines by caller and rule ("agent/conn-limit"), reading the logs on their volumes.
type decisions struct {
	Lines   map[string]map[string]int `json:"lines"`
	NetRule map[string]int            `json:"net_by_caller_rule"`
	// Denied counts the other components' refusals by component, action and reason
	// ("llm/request/key_unavailable"): a refusal the load generator never saw is one the run's
	// end cut, and the soak holds the count to what was in flight.
	Denied map[string]int `json:"denied_by_reason"`
}

func countDecisions(t *testing.T, ctx context.Context) decisions {
	t.Helper()
	d := decisions{Lines: map[string]map[string]int{}, NetRule: map[string]int{}, Denied: map[string]int{}}
	for _, c := range loadComponents {
		data, err := os.ReadFile(filepath.Join(volumeDir(t, ctx, "audit-"+c), "audit.jsonl"))
		if err != nil {
			t.Fatalf("read %s's audit log: %v", c, err)
		}
		d.Lines[c] = map[string]int{}
		for _, l := range bytes.Split(data, []byte("\n")) {
			var rec struct {
				Action   string            `json:"action"`
				Decision string            `json:"decision"`
				Caller   string            `json:"caller"`
				Reason   string            `json:"reason"`
				Fields   map[string]string `json:"fields"`
			}
			if json.Unmarshal(l, &rec) != nil || rec.Action == "" {
				continue
			}
			d.Lines[c][rec.Action+"/"+rec.Decision]++
			if c == "net" && rec.Action == "egress" {
				d.NetRule[fmt.Sprintf("%s/%s", rec.Caller, cmpPath(rec.Fields["rule"], rec.Decision))]++
			} else if rec.Decision == "deny" {
				d.Denied[c+"/"+rec.Action+"/"+rec.Reason]++
			}
		}
	}
	return d
}

// verifyRunning runs `sharness-ai audit verify --project --allow-running` and returns its JSON
// and whether every log verified.
func verifyRunning(t *testing.T, ctx context.Context, s *stack) (string, bool) {
	t.Helper()
	out, err := s.cli(ctx, "", "audit", "verify", "--json", "--project", project, "--allow-running")
	return string(out), err == nil
}

// netstat is one counter of /proc/PID/net/netstat (its network namespace's): a line of names
// under prefix, then a line of their values.
func netstat(pid, prefix, name string) int64 {
	b, _ := os.ReadFile("/proc/" + pid + "/net/netstat")
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != prefix+":" || len(values) != len(names) {
			continue
		}
		for j, n := range names {
			if n == name {
				v, _ := strconv.ParseInt(values[j], 10, 64)
				return v
			}
		}
	}
	return 0
}
