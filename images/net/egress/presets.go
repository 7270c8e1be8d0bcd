package egress

import (
	"maps"
	"slices"
)

// preset is a named, curated host list with the ports its clients need.
type preset struct {
	hosts []string
	ports []uint16
}

// presets are off unless a caller's rule names them. Each includes the hosts the ecosystem's
// client is redirected to, because net never follows a redirect: the client does, and its next
// request must be allowed on its own (docs/pitfalls.md).
//
// Every preset is a channel for data as wide as the service's write APIs: net sees only host
// and port inside a TLS tunnel, so an agent holding an attacker-supplied token can write to
// api.github.com, and an attacker-signed URL can upload to storage.googleapis.com.
var presets = map[string]preset{
	// The model API.
	"anthropic-api": {hosts: []string{"api.anthropic.com"}, ports: []uint16{443}},

	// The Go module proxy and checksum database. proxy.golang.org answers module zip
	// downloads with a 302 to a signed storage.googleapis.com URL (golang/go#52908,
	// golang/go#33928; seen in the Location header quoted in golang/go#68412).
	"go-proxy": {hosts: []string{"proxy.golang.org", "sum.golang.org", "storage.googleapis.com"}, ports: []uint16{443}},

	// Debian's archive through its CDN name (deb.debian.org, which Debian 12's default
	// sources use, security updates under /debian-security), the security archive's own
	// name, and the Fastly alias deb.debian.org documents. apt's default sources use plain
	// http (the archive is signed), hence port 80.
	"debian": {hosts: []string{"deb.debian.org", "security.debian.org", "cdn-fastly.deb.debian.org"}, ports: []uint16{80, 443}},

	// npm's registry serves metadata and tarballs from the same name.
	"npm": {hosts: []string{"registry.npmjs.org"}, ports: []uint16{443}},

	// PyPI: the index on pypi.org, the files on files.pythonhosted.org.
	"pypi": {hosts: []string{"pypi.org", "files.pythonhosted.org"}, ports: []uint16{443}},

	// GitHub over HTTPS: git smart HTTP on github.com, the REST API, archive downloads
	// (codeload), raw files, and release assets (redirected to objects.githubusercontent.com
	// and, for newer releases, release-assets.githubusercontent.com).
	"github": {hosts: []string{"github.com", "api.github.com", "codeload.github.com",
		"objects.githubusercontent.com", "raw.githubusercontent.com",
		"release-assets.githubusercontent.com"}, ports: []uint16{443}},
}

// Presets returns the names of the known presets, sorted.
func Presets() []string { return slices.Sorted(maps.Keys(presets)) }
