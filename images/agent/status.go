package main

import (
	"fmt"
	"strconv"
	"strings"
)

// procStatus holds the confinement fields of /proc/<pid>/status (proc(5)).
type procStatus struct {
	uid, gid               [4]uint64 // real, effective, saved set, filesystem
	capEff, capPrm, capBnd uint64
	noNewPrivs             uint64
	seccomp                uint64 // 0 disabled, 1 strict, 2 filter
}

// parseStatus reads the fields of procStatus from the text of /proc/self/status. Every field must
// be present exactly once and well formed: a kernel that does not report one (no seccomp support,
// say) cannot prove the confinement, so the parse fails rather than defaulting to zero.
func parseStatus(text string) (procStatus, error) {
	var s procStatus
	seen := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		key, value, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		value = strings.TrimSpace(value)
		var err error
		switch key {
		case "Uid":
			s.uid, err = parseIDs(value)
		case "Gid":
			s.gid, err = parseIDs(value)
		case "CapEff":
			s.capEff, err = strconv.ParseUint(value, 16, 64)
		case "CapPrm":
			s.capPrm, err = strconv.ParseUint(value, 16, 64)
		case "CapBnd":
			s.capBnd, err = strconv.ParseUint(value, 16, 64)
		case "NoNewPrivs":
			s.noNewPrivs, err = strconv.ParseUint(value, 10, 8)
		case "Seccomp":
			s.seccomp, err = strconv.ParseUint(value, 10, 8)
		default:
			continue
		}
		if err != nil {
			return procStatus{}, fmt.Errorf("parse status field %q: %w", key, err)
		}
		if seen[key] {
			return procStatus{}, fmt.Errorf("parse status: field %q repeated", key)
		}
		seen[key] = true
	}
	for _, key := range []string{"Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp"} {
		if !seen[key] {
			return procStatus{}, fmt.Errorf("parse status: field %q missing", key)
		}
	}
	return s, nil
}

// parseIDs parses the four tab-separated ids of a Uid or Gid line.
func parseIDs(value string) ([4]uint64, error) {
	var ids [4]uint64
	fields := strings.Fields(value)
	if len(fields) != len(ids) {
		return ids, fmt.Errorf("want %d ids, got %d", len(ids), len(fields))
	}
	for i, f := range fields {
		id, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return ids, err
		}
		ids[i] = id
	}
	return ids, nil
}
