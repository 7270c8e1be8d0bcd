//go:build !linux

package hygiene

// Report maps each measure to "ok" or "degraded: <why>".
type Report map[string]string

// Harden has nothing to apply outside Linux; kms runs on Linux, this keeps the tests building
// elsewhere.
func Harden() Report {
	return Report{"not_dumpable": "degraded: not Linux", "no_core": "degraded: not Linux", "mlockall": "degraded: not Linux"}
}

// SecretPage is heap memory outside Linux.
func SecretPage(n int) ([]byte, string, error) {
	return make([]byte, max(n, 4096)), "degraded: not Linux; the key is on the Go heap", nil
}

// Free scrubs mem.
func Free(mem []byte) { clear(mem) }
