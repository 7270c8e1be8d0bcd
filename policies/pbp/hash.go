package pbp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/gowebpki/jcs"
)

// hashPattern is the one spelling of a policy or layer hash.
var hashPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Digest is the hash of a decoded document: "sha256:" and the hex SHA-256 of its RFC 8785 (JCS)
// canonical JSON. Formatting, key order and comments in the YAML do not change it; any value does.
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

// CheckHash reports whether s is a well-formed hash string.
func CheckHash(s string) error {
	if !hashPattern.MatchString(s) {
		return fmt.Errorf("policy hash %q is not of the form sha256:<64 lower-case hex digits>", s)
	}
	return nil
}
