package pbp

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var hostPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)

// hostWithin says whether host (a name or a *.suffix pattern) is covered by one of the patterns.
func hostWithin(patterns []string, host string) bool {
	for _, p := range patterns {
		if p == host {
			return true
		}
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			h := strings.TrimPrefix(host, "*.")
			if strings.HasSuffix(h, "."+suffix) {
				return true
			}
		}
	}
	return false
}

func (m *merger) business(acc, p *Policy) error {
	b := p.Business
	if b == nil {
		return nil
	}
	a := ensure(&acc.Business)
	var err error
	if b.Net != nil {
		err = m.net(ensure(&a.Net), b.Net)
	}
	if b.LLM != nil && err == nil {
		l, al := b.LLM, ensure(&a.LLM)
		if al.OnSecret == "refuse" && l.OnSecret == "redact" {
			return m.widen("business.llm.on_secret", "refuse", "redact")
		}
		if l.OnSecret != "" {
			al.OnSecret = l.OnSecret
		}
		err = firstErr(m.same("business.llm.upstream", &al.Upstream, l.Upstream),
			m.subset("business.llm.models", &al.Models, l.Models, exact),
			m.limit("business.llm.max_tokens", &al.MaxTokens, l.MaxTokens),
			m.limit("business.llm.session_token_budget", &al.Budget, l.Budget),
			m.subset("business.llm.betas", &al.Betas, l.Betas, exact),
			m.subset("business.llm.server_tools", &al.ServerTools, l.ServerTools, exact),
			m.subset("business.llm.mcp_servers", &al.MCPServers, l.MCPServers, exact),
			m.subset("business.llm.extra_fields", &al.ExtraFields, l.ExtraFields, exact),
			m.subset("business.llm.tools", &al.Tools, l.Tools, exact),
			m.same("business.llm.key_secret", &al.KeySecret, l.KeySecret),
			m.limit("business.llm.key_cache_seconds", &al.KeyCacheSeconds, l.KeyCacheSeconds))
		if err == nil {
			err = m.filterRules(al, l.FilterRules)
		}
	}
	if b.KMS != nil && err == nil {
		ak := ensure(&a.KMS)
		err = firstErr(m.subset("business.kms.ops", &ak.Ops, b.KMS.Ops, exact),
			m.limit("business.kms.max_unwraps", &ak.MaxUnwraps, b.KMS.MaxUnwraps),
			m.subset("business.kms.trusted_senders", &ak.TrustedSenders, b.KMS.TrustedSenders, exact))
	}
	if b.Bash != nil && err == nil {
		err = m.subset("business.bash.profiles", &ensure(&a.Bash).Profiles, b.Bash.Profiles, exact)
	}
	if b.FS != nil && err == nil {
		af := ensure(&a.FS)
		union(&af.Ask, b.FS.Ask)
		err = firstErr(m.limitText("business.fs.max_file_size", &af.MaxFileSize, b.FS.MaxFileSize, ParseSize),
			m.permit("business.fs.exec_bits", &af.ExecBits, b.FS.ExecBits))
	}
	return err
}

// net narrows the parent's net rules a with a layer's n. A layer's caller rules replace the
// parent's, each within its parent's rule: hosts within its hosts, ask hosts within its hosts
// or ask hosts (asking about a host the parent allowed narrows), ports and presets a subset;
// and the parent's ask hosts stay ask hosts (union), so that no layer turns an ask into an
// allow by leaving it out.
func (m *merger) net(a, n *NetRules) error {
	union(&a.DenyHosts, n.DenyHosts)
	if n.Callers == nil {
		return nil
	}
	callers := slices.Clone(*n.Callers)
	for i, c := range callers {
		field := fmt.Sprintf("business.net.callers[%d]", i)
		if a.Callers == nil {
			continue
		}
		k := slices.IndexFunc(*a.Callers, func(x CallerRule) bool { return x.Caller == c.Caller })
		if k < 0 {
			return m.fail(field+".caller", "widens its parent: caller %q has no rule in the parent", c.Caller)
		}
		pr := (*a.Callers)[k]
		for _, h := range c.Hosts {
			if !hostWithin(pr.Hosts, h) {
				return m.widen(field+".hosts", pr.Hosts, c.Hosts)
			}
		}
		for _, h := range c.Ask {
			if !hostWithin(pr.Hosts, h) && !hostWithin(pr.Ask, h) {
				return m.widen(field+".ask", append(slices.Clone(pr.Hosts), pr.Ask...), c.Ask)
			}
		}
		if len(pr.Ask) > 0 {
			union(&callers[i].Ask, pr.Ask)
		}
		for _, port := range c.Ports {
			if !slices.Contains(pr.Ports, port) {
				return m.widen(field+".ports", pr.Ports, c.Ports)
			}
		}
		for _, ps := range c.Presets {
			if !slices.Contains(pr.Presets, ps) {
				return m.widen(field+".presets", pr.Presets, c.Presets)
			}
		}
	}
	a.Callers = &callers
	return nil
}

// filterRules adds a layer's secret-filter rules; a rule may be repeated word for word, never
// changed under the same name.
func (m *merger) filterRules(a *LLMRules, rules []FilterRule) error {
	for i, r := range rules {
		k := slices.IndexFunc(a.FilterRules, func(x FilterRule) bool { return x.Name == r.Name })
		switch {
		case k < 0:
			a.FilterRules = append(a.FilterRules, r)
		case !slices.Equal(a.FilterRules[k].Keywords, r.Keywords) || a.FilterRules[k].Regex != r.Regex:
			return m.fail(fmt.Sprintf("business.llm.filter_rules[%d].name", i), "changes the rule %q: a layer may add filter rules, not change them", r.Name)
		}
	}
	return nil
}
