package pbp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Digest is the hash of a decoded document: "sha256:" and the hex SHA-256 of its RFC 8785 (JCS)
// canonical JSON. Formatting, key order and comments in the YAML do not change it; any value does.
// keys.CheckHash accepts exactly this form.
func Digest(value any) (string, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return "", fmt.Errorf("encode for hashing: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalise (RFC 8785): %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
