package pbp

import "regexp"

// ComponentNamePattern is the one spelling of a component name. A name becomes a DNS label, a
// compose service and volume name (audit-<name>, gate-<name>, identity-<name>), a path segment
// of the compiled policy and of the SPIFFE ID, and a file name: lower-case letters, digits and
// '-', starting with a letter, at most 31 bytes. Volume names in a policy are spelled the same.
const ComponentNamePattern = `^[a-z][a-z0-9-]{0,30}$`

var namePattern = regexp.MustCompile(ComponentNamePattern)

// ValidComponentName says whether s is spelled as a component name. Code outside the policy
// model that takes a component name from a container, a volume or a file checks it with this,
// rather than a copy of the pattern.
func ValidComponentName(s string) bool { return namePattern.MatchString(s) }
