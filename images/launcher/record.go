package main

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sharness-ai/sharness/internal/audit"
)

// openRecord opens the launcher's audit log in dir, signed with its own SVID, and writes the
// session record, signed at once: the session CA's hash and, public, its certificate (so
// `sharness-ai audit verify --project` can verify every log of the session from the volumes
// alone, and a person can compare the hash with the launcher's "session started" line), the
// policy, each SVID issued and the CA key's destruction. The record is written whole or the
// launcher does not start: no value is clipped.
func openRecord(dir string, ids *identities, self, policy string) (*audit.Writer, error) {
	id, err := audit.StaticIdentity(ids.self.certDER, ids.self.keyDER, ids.caDER)
	if err != nil {
		return nil, fmt.Errorf("the launcher's own SVID: %w", err)
	}
	w, err := audit.OpenComponent(dir, id, self, policy)
	if err != nil {
		return nil, err
	}
	events := []audit.Event{{Action: "session_start", Decision: "allow", Reason: "the mounted policy is the one supplied", Fields: map[string]string{
		"session_ca_sha256": ids.caSHA256, "policy": policy, "ca_cert": base64.StdEncoding.EncodeToString(ids.caDER),
		"not_after": ids.notAfter.UTC().Format(time.RFC3339)}}}
	issued := maps.Clone(ids.svids)
	issued[self] = ids.self
	for _, role := range slices.Sorted(maps.Keys(issued)) {
		events = append(events, audit.Event{Action: "svid_issue", Decision: "allow", Destination: issued[role].id, Fields: map[string]string{"role": role}})
	}
	events = append(events, audit.Event{Action: "ca_key", Decision: "destroyed"})
	for _, e := range events {
		if err == nil {
			err = w.Log(e)
		}
	}
	if err = cmp.Or(err, w.Checkpoint()); err != nil {
		w.Close()
		return nil, fmt.Errorf("write the session record: %w", err)
	}
	return w, nil
}
