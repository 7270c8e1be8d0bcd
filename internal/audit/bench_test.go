package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The benchmarks measure what the record costs against a named baseline in the same run, and
// report the ratio as "×baseline", ns/op over the median ns/op of the baseline's runs (issue:
// record, "Benchmarks"):
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/audit
//
// BenchmarkAppend: one decision appended with Writer.Log (canonical encoding, chaining, a
// checkpoint signed with a P-256 SVID key every DefaultEvery lines), with the fsync at each
// checkpoint and without it (UnsafeNoSync), against writing the same event line without
// chaining: json.Marshal and one write to the same kind of file.
//
// BenchmarkVerify: Scan with a Trust over a log of 10,000 events (101 checkpoints), in lines/s,
// against reading the same lines with bufio and json.Unmarshal and no check at all.

func BenchmarkAppend(b *testing.B) {
	s := newSession(b)
	var baseline []float64
	b.Run("baseline=marshal+write", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "plain.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for i := 0; b.Loop(); i++ {
			r := record{Seq: uint64(i), Time: time.Now().UTC().Format(time.RFC3339Nano), Component: "net", Policy: policy, Type: "event", Event: event(i)}
			line, err := json.Marshal(&r)
			if err == nil {
				_, err = f.Write(append(line, '\n'))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		baseline = append(baseline, nsPerOp(b))
	})
	for _, sync := range []bool{true, false} {
		name := map[bool]string{true: "chained+fsync-per-checkpoint", false: "chained-no-fsync"}[sync]
		b.Run(name, func(b *testing.B) {
			c := s.config()
			c.UnsafeNoSync, c.Interval = !sync, time.Hour
			w, err := Open(filepath.Join(b.TempDir(), "net.jsonl"), c)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			for i := 0; b.Loop(); i++ {
				if err := w.Log(event(i)); err != nil {
					b.Fatal(err)
				}
			}
			reportRatio(b, nsPerOp(b), baseline)
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	s := newSession(b)
	c := s.config()
	c.UnsafeNoSync, c.Interval = true, time.Hour
	path := filepath.Join(b.TempDir(), "net.jsonl")
	w, err := Open(path, c)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		w.Log(event(i))
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	n := bytes.Count(data, []byte("\n"))
	var baseline []float64
	b.Run("baseline=json-decode", func(b *testing.B) {
		for b.Loop() {
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(nil, MaxLine)
			for sc.Scan() {
				var r record
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					b.Fatal(err)
				}
			}
		}
		baseline = append(baseline, nsPerOp(b))
		b.ReportMetric(float64(n)/(nsPerOp(b)/1e9), "lines/s")
	})
	b.Run("verify", func(b *testing.B) {
		tr := s.trust()
		for b.Loop() {
			if _, err := Scan(bytes.NewReader(data), &tr, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/(nsPerOp(b)/1e9), "lines/s")
		reportRatio(b, nsPerOp(b), baseline)
	})
}

func nsPerOp(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

// reportRatio reports ns/op over the median of the baseline's runs in this process.
func reportRatio(b *testing.B, ns float64, baseline []float64) {
	if len(baseline) > 0 {
		v := slices.Sorted(slices.Values(baseline))
		b.ReportMetric(ns/v[len(v)/2], "×baseline")
	}
}
