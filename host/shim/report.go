package shim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// logLine is runc's log line (logrus's JSON) plus the refusal's parts as their own keys.
// containerd's runc shim reads the last "error" line of this file when runc fails and puts its
// msg in the error dockerd returns ("OCI runtime create failed: <msg>: unknown"); its decoder
// stops at the first line that is not JSON or whose time is not RFC 3339.
type logLine struct {
	Level     string `json:"level"`
	Msg       string `json:"msg"`
	Time      string `json:"time"`
	Container string `json:"container,omitempty"`
	Component string `json:"component,omitempty"`
	Policy    string `json:"policy,omitempty"`
	Field     string `json:"field"`
	Want      string `json:"want"`
	Got       string `json:"got"`
}

// report writes a refusal as one line to runc's --log file (in its --log-format) and as text to
// stderr. A log file that cannot be written is said on stderr; the refusal stands.
func report(r *Refusal, logPath, format string, now time.Time, stderr io.Writer) {
	msg, first := r.Error(), r.first()
	fmt.Fprintln(stderr, msg)
	if logPath == "" {
		return
	}
	ts := now.UTC().Format(time.RFC3339Nano)
	var line []byte
	if format == "json" {
		line, _ = json.Marshal(logLine{"error", msg, ts, r.Container, r.Component, r.Policy, first.Field, first.Want, first.Got})
	} else {
		line = fmt.Appendf(nil, "time=%q level=error msg=%s container=%s component=%s policy=%s field=%s want=%s got=%s",
			ts, strconv.Quote(msg), strconv.Quote(r.Container), strconv.Quote(r.Component),
			strconv.Quote(r.Policy), strconv.Quote(first.Field), strconv.Quote(first.Want), strconv.Quote(first.Got))
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err == nil {
		_, err = f.Write(append(line, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sharness-runtime: write log %s: %v\n", logPath, err)
	}
}
