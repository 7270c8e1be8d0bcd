package pbp

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/sharness-ai/sharness/internal/strictyaml"
	"github.com/sharness-ai/sharness/policies/keys"
)

// CheckShape checks one manifest or layer file on its own, as the loader would before it looks
// at anything else: the strict decode (unknown fields, types, floats, integers, anchors, tags,
// duplicate keys), the header (pbp: 1 and a kind of manifest or layer, which picks the struct),
// and the spelling of each single value that the loader checks later (names, kinds, layer ids,
// hashes, paths, sizes, durations, ports, ranges, enums, required fields).
//
// It does not read layer files, compare hashes with content, resolve references (layer ids a
// component names, edge and caller components), check that layers narrow, or apply the design's
// rules. It is the Go side of the agreement with policies/schema.
//
// Where the loader treats an explicit empty string like an absent field (code_sha256,
// max_memory, max_runtime, syscalls.base, on_secret, max_file_size), CheckShape refuses it, as
// the schema does.
func CheckShape(file string, data []byte) error {
	var generic any
	d, err := strictyaml.Decode(file, data, &generic)
	if err != nil {
		return err
	}
	top, _ := d.Value().(map[string]any)
	switch top["kind"] {
	case "manifest":
		var md ManifestDoc
		d, err := strictyaml.Decode(file, data, &md)
		if err != nil {
			return err
		}
		if err := checkHeader(d, md.PBP, md.Kind, "manifest"); err != nil {
			return err
		}
		return shapeManifest(d, &md)
	case "layer":
		var ld LayerDoc
		d, err := strictyaml.Decode(file, data, &ld)
		if err != nil {
			return err
		}
		if err := checkHeader(d, ld.PBP, ld.Kind, "layer"); err != nil {
			return err
		}
		return shapeLayer(d, &ld)
	}
	if !d.Has("pbp") {
		return d.ErrAt("pbp", "missing: the format version must be given as pbp: %d", Version)
	}
	if k, ok := top["kind"].(string); ok {
		return d.ErrAt("kind", "is %q, want \"manifest\" or \"layer\"", k)
	}
	return d.ErrAt("kind", "missing or not a string: want \"manifest\" or \"layer\"")
}

// shapeManifest checks the manifest's single values: checkManifest without the references.
func shapeManifest(d *strictyaml.Document, md *ManifestDoc) error {
	if !trustPattern.MatchString(md.TrustDomain) {
		return d.ErrAt("trust_domain", "%q is not a valid SPIFFE trust domain (lower-case letters, digits, '.', '-', '_')", md.TrustDomain)
	}
	if len(md.Layers) == 0 {
		return d.ErrAt("layers", "a manifest needs at least one layer")
	}
	for i, ref := range md.Layers {
		f := fmt.Sprintf("layers[%d]", i)
		if !layerPattern.MatchString(ref.ID) {
			return d.ErrAt(f+".id", "%q is not a layer id of the form L<0-5>-<name>", ref.ID)
		}
		if path.IsAbs(ref.File) || !fs.ValidPath(ref.File) {
			return d.ErrAt(f+".file", "%q must be a relative path inside the manifest's folder", ref.File)
		}
		if err := keys.CheckHash(ref.SHA256); err != nil {
			return d.ErrAt(f+".sha256", "%v", err)
		}
	}
	if len(md.Components) == 0 {
		return d.ErrAt("components", "a manifest needs at least one component")
	}
	names := make([]string, 0, len(md.Components))
	for n := range md.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c, f := md.Components[name], "components."+name
		if !ValidComponentName(name) {
			return d.ErrAt(f, "component name %q must match %s", name, ComponentNamePattern)
		}
		if !slices.Contains(Kinds, c.Kind) {
			return d.ErrAt(f+".kind", "unknown component kind %q (known: %v)", c.Kind, Kinds)
		}
		if len(c.Layers) == 0 {
			return d.ErrAt(f+".layers", "a component needs at least one layer")
		}
		for i, id := range c.Layers {
			if !layerPattern.MatchString(id) {
				return d.ErrAt(fmt.Sprintf("%s.layers[%d]", f, i), "%q is not a layer id of the form L<0-5>-<name>", id)
			}
		}
	}
	for i, e := range md.Edges {
		f := fmt.Sprintf("edges[%d]", i)
		if !ValidComponentName(e.From) {
			return d.ErrAt(f+".from", "%q is not a component name", e.From)
		}
		if !ValidComponentName(e.To) {
			return d.ErrAt(f+".to", "%q is not a component name", e.To)
		}
	}
	return shapeTestWorld(d, md.TestWorld)
}

// shapeLayer checks a layer's single values: what the merger checks of each value on its own,
// without comparing it with the parent's.
func shapeLayer(d *strictyaml.Document, ld *LayerDoc) error {
	if !slices.Contains(Levels, ld.Level) {
		return d.ErrAt("level", "%q is not a level (known: %v)", ld.Level, Levels)
	}
	p := &ld.Policy
	m := shaper{d}
	for _, f := range []string{"subject.code_sha256", "process.max_memory", "process.max_runtime",
		"syscalls.base", "business.llm.on_secret", "business.fs.max_file_size"} {
		if v, ok := valueAt(d.Value(), "policy."+f); ok && v == "" {
			return m.fail(f, "must not be empty: leave the field out instead")
		}
	}
	if s := p.Subject; s != nil && s.CodeSHA256 != "" && keys.CheckHash(s.CodeSHA256) != nil {
		return m.fail("subject.code_sha256", "%q is not of the form sha256:<64 hex digits>", s.CodeSHA256)
	}
	if id := p.Identity; id != nil {
		for _, v := range []struct {
			field string
			n     *int
		}{{"identity.uid", id.UID}, {"identity.gid", id.GID}} {
			if v.n != nil && (*v.n < 1 || *v.n >= 1<<31) {
				return m.fail(v.field, "%d must be a non-root id between 1 and 2^31-1", *v.n)
			}
		}
	}
	if pr := p.Process; pr != nil {
		if pr.Capabilities != nil {
			for _, c := range *pr.Capabilities {
				if !capPattern.MatchString(c) {
					return m.fail("process.capabilities", "%q is not a capability name such as CAP_NET_BIND_SERVICE", c)
				}
			}
		}
		if pr.NoNewPrivs != nil && !*pr.NoNewPrivs {
			return m.fail("process.no_new_privs", "false is forbidden: every component runs with no_new_privs")
		}
		if pr.Exec != nil {
			for i, x := range *pr.Exec {
				if !path.IsAbs(x) || path.Clean(x) != strings.TrimSuffix(x, "/") || x == "/" {
					return m.fail(fmt.Sprintf("process.exec[%d]", i), "%q must be an absolute clean path (a folder ends in \"/\"; not / itself)", x)
				}
			}
		}
		switch pr.Landlock {
		case "", LandlockEnforce, LandlockBestEffort, LandlockPerCommand:
		default:
			return m.fail("process.landlock", "%q must be enforce, best_effort or per_command", pr.Landlock)
		}
		if pr.MaxPIDs != nil && *pr.MaxPIDs < 1 {
			return m.fail("process.max_pids", "%d must be at least 1", *pr.MaxPIDs)
		}
		if err := firstErr(m.size("process.max_memory", pr.MaxMemory),
			m.duration("process.max_runtime", pr.MaxRuntime)); err != nil {
			return err
		}
	}
	if f := p.Files; f != nil {
		for i, pp := range f.Protected {
			if path.IsAbs(pp) || !cleanRel(pp) {
				return m.fail(fmt.Sprintf("files.protected[%d]", i), "%q must be a clean path relative to the workspace", pp)
			}
		}
		if w := f.Workspace; w != "" && w != "rw" && w != "ro" {
			return m.fail("files.workspace", "%q must be rw or ro", w)
		}
		if f.Tmpfs != nil {
			for i, t := range *f.Tmpfs {
				field := fmt.Sprintf("files.tmpfs[%d]", i)
				if !path.IsAbs(t.Path) || path.Clean(t.Path) != t.Path || t.Path == "/" {
					return m.fail(field+".path", "%q must be a clean absolute path other than /", t.Path)
				}
				if t.Size == "" {
					return m.fail(field+".size", "tmpfs %s has no size: every tmpfs needs one", t.Path)
				}
				if err := m.size(field+".size", t.Size); err != nil {
					return err
				}
			}
		}
		if f.Volumes != nil {
			for i, v := range *f.Volumes {
				if !namePattern.MatchString(v.Name) || !path.IsAbs(v.Target) || path.Clean(v.Target) != v.Target {
					return m.fail(fmt.Sprintf("files.volumes[%d]", i), "volume needs a name matching %s and a clean absolute target", ComponentNamePattern)
				}
				if strings.HasPrefix(v.Name, "identity-") {
					return m.fail(fmt.Sprintf("files.volumes[%d].name", i), "%q is reserved: identity-<role> volumes hold a role's SVID socket and are mounted by the compiler alone", v.Name)
				}
			}
		}
	}
	if s := p.Syscalls; s != nil && s.Base != "" && s.Base != "docker-default" {
		return m.fail("syscalls.base", "unknown base profile %q (known: docker-default)", s.Base)
	}
	b := p.Business
	if b == nil {
		return nil
	}
	if n := b.Net; n != nil {
		for i, h := range n.DenyHosts {
			if !hostPattern.MatchString(h) {
				return m.fail(fmt.Sprintf("business.net.deny_hosts[%d]", i), "%q is not a host name or *.suffix pattern", h)
			}
		}
		if n.Callers != nil {
			for i, c := range *n.Callers {
				field := fmt.Sprintf("business.net.callers[%d]", i)
				if !ValidComponentName(c.Caller) {
					return m.fail(field+".caller", "%q is not a component name", c.Caller)
				}
				for _, h := range c.Hosts {
					if !hostPattern.MatchString(h) {
						return m.fail(field+".hosts", "%q is not a lower-case host name or *.suffix pattern (IP literals are never allowed)", h)
					}
				}
				for _, h := range c.Ask {
					if !hostPattern.MatchString(h) {
						return m.fail(field+".ask", "%q is not a lower-case host name or *.suffix pattern (IP literals are never allowed)", h)
					}
				}
				for _, port := range c.Ports {
					if port < 1 || port > 65535 {
						return m.fail(field+".ports", "port %d is out of range", port)
					}
				}
			}
		}
	}
	if l := b.LLM; l != nil {
		if l.OnSecret != "" && l.OnSecret != "refuse" && l.OnSecret != "redact" {
			return m.fail("business.llm.on_secret", "%q must be refuse or redact", l.OnSecret)
		}
		for _, v := range []struct {
			field string
			n     *int
		}{{"business.llm.max_tokens", l.MaxTokens}, {"business.llm.session_token_budget", l.Budget}} {
			if v.n != nil && *v.n < 0 {
				return m.fail(v.field, "%d must not be negative", *v.n)
			}
		}
		if err := m.llm(l); err != nil {
			return err
		}
	}
	if k := b.KMS; k != nil {
		if k.MaxUnwraps != nil && *k.MaxUnwraps < 0 {
			return m.fail("business.kms.max_unwraps", "%d must not be negative", *k.MaxUnwraps)
		}
		if k.Ops != nil {
			for _, op := range *k.Ops {
				if !slices.Contains(KMSOps, op) {
					return m.fail("business.kms.ops", "%q is not a kms operation (%s)", op, strings.Join(KMSOps, ", "))
				}
			}
		}
		if k.TrustedSenders != nil {
			for _, pin := range *k.TrustedSenders {
				if _, err := keys.ParsePin(pin); err != nil {
					return m.fail("business.kms.trusted_senders", "%v", err)
				}
			}
		}
	}
	if f := b.FS; f != nil {
		for i, pp := range f.Ask {
			if path.IsAbs(pp) || !cleanRel(pp) {
				return m.fail(fmt.Sprintf("business.fs.ask[%d]", i), "%q must be a clean path relative to the workspace", pp)
			}
		}
		return m.size("business.fs.max_file_size", f.MaxFileSize)
	}
	return nil
}

// shaper reports a layer's policy fields by their path, as the merger does.
type shaper struct{ d *strictyaml.Document }

func (m shaper) fail(field, format string, args ...any) error {
	return m.d.ErrAt("policy."+field, format, args...)
}

// size checks a size on its own ("" is absent).
func (m shaper) size(field, v string) error {
	if v == "" {
		return nil
	}
	if _, err := ParseSize(v); err != nil {
		return m.fail(field, "%v", err)
	}
	return nil
}

// duration checks a duration on its own ("" is absent).
func (m shaper) duration(field, v string) error {
	if v == "" {
		return nil
	}
	if _, err := ParseDuration(v); err != nil {
		return m.fail(field, "%v", err)
	}
	return nil
}

// valueAt returns the decoded value at a dotted field path of maps, and whether it is there.
func valueAt(v any, field string) (any, bool) {
	for _, k := range strings.Split(field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// KMSOps are the operations kms knows.
var KMSOps = []string{"public", "unwrap", "seal_to", "destroy"}

var (
	capPattern = regexp.MustCompile(`^CAP_[A-Z_]{2,30}$`)
	secretName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	toolsPin   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// SecretName says whether s may name a sealed secret (it becomes a file name in kms).
func SecretName(s string) bool { return secretName.MatchString(s) }

func (m shaper) llm(l *LLMRules) error {
	if l.Upstream != "" {
		u, err := url.Parse(l.Upstream)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || !hostPattern.MatchString(u.Hostname()) {
			return m.fail("business.llm.upstream", "%q must be https://<host name>[:port] with nothing after it", l.Upstream)
		}
	}
	if l.KeySecret != "" && !SecretName(l.KeySecret) {
		return m.fail("business.llm.key_secret", "%q must match %s", l.KeySecret, secretName)
	}
	if l.KeyCacheSeconds != nil && *l.KeyCacheSeconds < 0 {
		return m.fail("business.llm.key_cache_seconds", "%d must not be negative", *l.KeyCacheSeconds)
	}
	if l.Tools != nil {
		for _, t := range *l.Tools {
			if !toolsPin.MatchString(t) {
				return m.fail("business.llm.tools", "%q must be sha256:<64 lower-case hex>", t)
			}
		}
	}
	for i, r := range l.FilterRules {
		field := fmt.Sprintf("business.llm.filter_rules[%d]", i)
		if !secretName.MatchString(r.Name) {
			return m.fail(field+".name", "%q must match %s", r.Name, secretName)
		}
		if _, err := regexp.Compile(r.Regex); err != nil || r.Regex == "" {
			return m.fail(field+".regex", "%q is not a usable regular expression (RE2 syntax)", r.Regex)
		}
		if regexp.MustCompile(r.Regex).MatchString("") {
			return m.fail(field+".regex", "%q matches the empty string", r.Regex)
		}
		for _, k := range r.Keywords {
			if k == "" {
				return m.fail(field+".keywords", "a keyword must not be empty")
			}
		}
	}
	return nil
}

// cleanRel says whether p is clean (a trailing "/" marks a folder), not "." and does not climb
// out with "..". Callers refuse absolute paths themselves.
func cleanRel(p string) bool {
	return p != "" && path.Clean(p) == strings.TrimSuffix(p, "/") && p != "." && !strings.HasPrefix(p, "../") && p != ".."
}
