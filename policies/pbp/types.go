// Package pbp is the Process Behaviour Policy model: the manifest, its layers, their composition
// by intersection, the design's rules no layer overrides, and the manifest hash M. Documents are
// read by internal/strictyaml; M's signature and the operator's keys are policies/keys'.
//
// It is pure: it reads through an fs.FS handed to it and never touches the network, processes or
// logs. What it does not guarantee: a policy says what a component may do; only the compiler's
// artefacts and the runtime that enforces them make it true.
package pbp

// Version is the only manifest format version this package reads.
const Version = 1

// Kind is a component kind the design knows.
type Kind string

// The component kinds of the design (docs/architecture.md); design.go says what each may do.
const (
	KindApp      Kind = "app"
	KindNet      Kind = "net"
	KindLLM      Kind = "llm"
	KindKMS      Kind = "kms"
	KindBash     Kind = "bash"
	KindFS       Kind = "fs"
	KindLauncher Kind = "launcher"
)

// Kinds lists every known kind in a stable order.
var Kinds = []Kind{KindApp, KindNet, KindLLM, KindKMS, KindBash, KindFS, KindLauncher}

// Levels are the layer levels, outermost first (seed: L0 OS base … L5 this session).
var Levels = []string{"L0", "L1", "L2", "L3", "L4", "L5"}

// ManifestDoc is the top-level manifest file. Its canonical JSON hash is the policy hash M.
type ManifestDoc struct {
	PBP         int                     `yaml:"pbp" json:"pbp"`
	Kind        string                  `yaml:"kind" json:"kind"`
	Name        string                  `yaml:"name" json:"name"`
	TrustDomain string                  `yaml:"trust_domain" json:"trust_domain"`
	Layers      []LayerRef              `yaml:"layers" json:"layers"`
	Components  map[string]ComponentRef `yaml:"components" json:"components"`
	Edges       []Edge                  `yaml:"edges,omitempty" json:"edges,omitempty"`
	// TestWorld marks a test world's policy (testworld.go); a manifest without it is a
	// production policy, under which every test switch is refused.
	TestWorld *TestWorld `yaml:"test_world,omitempty" json:"test_world,omitempty"`
}

// LayerRef names a layer file by its path (relative to the manifest) and its own hash.
type LayerRef struct {
	ID     string `yaml:"id" json:"id"`
	File   string `yaml:"file" json:"file"`
	SHA256 string `yaml:"sha256" json:"sha256"`
}

// ComponentRef declares one component: its kind and its chain of layers, outermost first.
type ComponentRef struct {
	Kind   Kind     `yaml:"kind" json:"kind"`
	Layers []string `yaml:"layers" json:"layers"`
}

// Edge is one allowed connection: From may open a connection to To, if the design's edge matrix
// (designEdges) allows their kinds. Each edge becomes its own internal network, so no other pair
// of components can reach each other.
type Edge struct {
	From string `yaml:"from" json:"from"`
	To   string `yaml:"to" json:"to"`
}

// LayerDoc is one layer file.
type LayerDoc struct {
	PBP    int    `yaml:"pbp" json:"pbp"`
	Kind   string `yaml:"kind" json:"kind"`
	Level  string `yaml:"level" json:"level"`
	Name   string `yaml:"name" json:"name"`
	Policy Policy `yaml:"policy" json:"policy"`
}

// Policy is the per-component schema, the same at every layer. A nil or absent field leaves
// the parent's value in force.
type Policy struct {
	Subject  *Subject  `yaml:"subject,omitempty" json:"subject,omitempty"`
	Identity *Identity `yaml:"identity,omitempty" json:"identity,omitempty"`
	Process  *Process  `yaml:"process,omitempty" json:"process,omitempty"`
	Files    *Files    `yaml:"files,omitempty" json:"files,omitempty"`
	Network  *Network  `yaml:"network,omitempty" json:"network,omitempty"`
	Syscalls *Syscalls `yaml:"syscalls,omitempty" json:"syscalls,omitempty"`
	Business *Business `yaml:"business,omitempty" json:"business,omitempty"`
	Audit    *Audit    `yaml:"audit,omitempty" json:"audit,omitempty"`
}

// Subject binds the policy to what runs.
type Subject struct {
	Image      string   `yaml:"image,omitempty" json:"image,omitempty"`
	Entrypoint []string `yaml:"entrypoint,omitempty" json:"entrypoint,omitempty"`
	CodeSHA256 string   `yaml:"code_sha256,omitempty" json:"code_sha256,omitempty"`
}

// Identity is the component's numeric user and group. Its SPIFFE ID is derived from the
// manifest's trust domain and the component's name, never written by hand.
type Identity struct {
	UID *int `yaml:"uid,omitempty" json:"uid,omitempty"`
	GID *int `yaml:"gid,omitempty" json:"gid,omitempty"`
}

// Process holds the kernel-enforced process limits.
type Process struct {
	Capabilities *[]string `yaml:"capabilities,omitempty" json:"capabilities,omitempty"`
	NoNewPrivs   *bool     `yaml:"no_new_privs,omitempty" json:"no_new_privs,omitempty"`
	MaxPIDs      *int      `yaml:"max_pids,omitempty" json:"max_pids,omitempty"`
	MaxMemory    string    `yaml:"max_memory,omitempty" json:"max_memory,omitempty"`
	MaxRuntime   string    `yaml:"max_runtime,omitempty" json:"max_runtime,omitempty"`
	// Exec lists what the component's processes may execute: absolute paths of files, or of
	// folders ending in "/" (everything beneath). The runtime shim enforces it with a Landlock
	// domain on the container's whole process tree. Unset: only the entrypoint's binary. A layer
	// may only shorten the list; nothing on a writable mount may be listed.
	Exec *[]string `yaml:"exec,omitempty" json:"exec,omitempty"`
	// Landlock is how the shim confines the container's process tree: "enforce" (the default)
	// refuses to start the container on a kernel without the Landlock ABI the shim needs;
	// "best_effort" applies what the kernel has and says so; "per_command" (kind bash only) makes
	// no container-wide domain, because a domain forbids the mounts each of bash's sandboxes
	// needs, and bash confines every command with a domain of its own. A layer may only change a
	// value to "enforce".
	Landlock string `yaml:"landlock,omitempty" json:"landlock,omitempty"`
}

// The values of process.landlock.
const (
	LandlockEnforce    = "enforce"
	LandlockBestEffort = "best_effort"
	LandlockPerCommand = "per_command"
)

// Files says where a component may write. The root filesystem is always read-only.
type Files struct {
	Tmpfs     *[]Tmpfs  `yaml:"tmpfs,omitempty" json:"tmpfs,omitempty"`
	Volumes   *[]Volume `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	Protected []string  `yaml:"protected,omitempty" json:"protected,omitempty"`
	// Workspace mounts the person's workspace folder at /workspace: "rw" or "ro". A layer may
	// narrow rw to ro, never widen. Protected paths are mounted read-only over it for every kind
	// but fs, their only writer.
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
}

// Tmpfs is a size-limited writable in-memory mount.
type Tmpfs struct {
	Path string `yaml:"path" json:"path"`
	Size string `yaml:"size" json:"size"`
}

// Volume is a named Docker volume mounted at Target.
type Volume struct {
	Name     string `yaml:"name" json:"name"`
	Target   string `yaml:"target" json:"target"`
	ReadOnly *bool  `yaml:"read_only,omitempty" json:"read_only,omitempty"`
}

// Network is what the component may reach beyond its edges.
type Network struct {
	// Egress puts the component on the one non-internal network. Only kind net may have it.
	Egress *bool `yaml:"egress,omitempty" json:"egress,omitempty"`
}

// Syscalls narrows the compiled seccomp profile, which starts from Docker's default minus the
// design's floor.
type Syscalls struct {
	Base  string    `yaml:"base,omitempty" json:"base,omitempty"`
	Allow *[]string `yaml:"allow,omitempty" json:"allow,omitempty"`
	Deny  []string  `yaml:"deny,omitempty" json:"deny,omitempty"`
}

// Business holds the component-specific rules; only the block matching the kind may be set.
type Business struct {
	Net  *NetRules  `yaml:"net,omitempty" json:"net,omitempty"`
	LLM  *LLMRules  `yaml:"llm,omitempty" json:"llm,omitempty"`
	KMS  *KMSRules  `yaml:"kms,omitempty" json:"kms,omitempty"`
	Bash *BashRules `yaml:"bash,omitempty" json:"bash,omitempty"`
	FS   *FSRules   `yaml:"fs,omitempty" json:"fs,omitempty"`
}

// NetRules are the egress proxy's per-caller allowlists.
type NetRules struct {
	Callers *[]CallerRule `yaml:"callers,omitempty" json:"callers,omitempty"`
	// DenyHosts always wins over an allow (union across layers).
	DenyHosts []string `yaml:"deny_hosts,omitempty" json:"deny_hosts,omitempty"`
}

// CallerRule allows one caller (a component name) to reach hosts on ports. Presets name
// curated host lists (for example "go-proxy", "debian", "anthropic-api").
type CallerRule struct {
	Caller  string   `yaml:"caller" json:"caller"`
	Hosts   []string `yaml:"hosts,omitempty" json:"hosts,omitempty"`
	Ports   []int    `yaml:"ports,omitempty" json:"ports,omitempty"`
	Presets []string `yaml:"presets,omitempty" json:"presets,omitempty"`
	// Ask lists hosts (exact or *.suffix, as Hosts) the caller may reach on its ports only once
	// the operator approves (the approval gate, action net.connect). An ask entry wins over a
	// hosts or preset entry that also matches; deny_hosts wins over both. A layer may move a host
	// from hosts to ask, never from ask to hosts, and keeps its parent's ask entries (union).
	Ask []string `yaml:"ask,omitempty" json:"ask,omitempty"`
}

// LLMRules constrain what the model proxy forwards. In the composed policy an unset allowlist
// allows nothing: llm refuses to start without upstream, models, max_tokens, the budget and
// key_secret, and treats an unset betas, server_tools, mcp_servers, extra_fields or tools as empty.
type LLMRules struct {
	Upstream  string    `yaml:"upstream,omitempty" json:"upstream,omitempty"`
	Models    *[]string `yaml:"models,omitempty" json:"models,omitempty"`
	MaxTokens *int      `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	Budget    *int      `yaml:"session_token_budget,omitempty" json:"session_token_budget,omitempty"`
	OnSecret  string    `yaml:"on_secret,omitempty" json:"on_secret,omitempty"`
	// Betas are the anthropic-beta header values llm forwards.
	Betas *[]string `yaml:"betas,omitempty" json:"betas,omitempty"`
	// ServerTools are the server-side tool types (e.g. web_fetch_20250910) a request may carry:
	// they make the provider fetch URLs for the agent.
	ServerTools *[]string `yaml:"server_tools,omitempty" json:"server_tools,omitempty"`
	// MCPServers are the mcp_servers URLs a request may name.
	MCPServers *[]string `yaml:"mcp_servers,omitempty" json:"mcp_servers,omitempty"`
	// ExtraFields are top-level request fields allowed beyond the ones llm knows.
	ExtraFields *[]string `yaml:"extra_fields,omitempty" json:"extra_fields,omitempty"`
	// Tools are the pinned tool lists, each "sha256:<hex>" of the normalised definitions.
	Tools *[]string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// KeySecret names the sealed secret kms holds the API key under.
	KeySecret string `yaml:"key_secret,omitempty" json:"key_secret,omitempty"`
	// KeyCacheSeconds is how long llm may keep an opened key; 0 asks kms on every request.
	KeyCacheSeconds *int `yaml:"key_cache_seconds,omitempty" json:"key_cache_seconds,omitempty"`
	// FilterRules add secret-filter rules to the curated ones (adding a rule only narrows).
	FilterRules []FilterRule `yaml:"filter_rules,omitempty" json:"filter_rules,omitempty"`
}

// FilterRule is one secret-filter rule a policy adds: a regular expression (RE2), and optional
// keywords of which one must appear in the text before the expression is tried.
type FilterRule struct {
	Name     string   `yaml:"name" json:"name"`
	Regex    string   `yaml:"regex" json:"regex"`
	Keywords []string `yaml:"keywords,omitempty" json:"keywords,omitempty"`
}

// KMSRules constrain custody operations. In the composed policy unset ops allow nothing.
type KMSRules struct {
	Ops        *[]string `yaml:"ops,omitempty" json:"ops,omitempty"`
	MaxUnwraps *int      `yaml:"max_unwraps,omitempty" json:"max_unwraps,omitempty"`
	// TrustedSenders are the Ed25519 keys ("ed25519:<base64>") a sealed secret must be signed
	// by; unset accepts unsigned secrets (only the host can place them), and kms says so at start.
	TrustedSenders *[]string `yaml:"trusted_senders,omitempty" json:"trusted_senders,omitempty"`
}

// BashRules constrain the shell sandboxes.
type BashRules struct {
	Profiles *[]string `yaml:"profiles,omitempty" json:"profiles,omitempty"`
}

// FSRules constrain writes to protected paths.
type FSRules struct {
	MaxFileSize string `yaml:"max_file_size,omitempty" json:"max_file_size,omitempty"`
	ExecBits    *bool  `yaml:"exec_bits,omitempty" json:"exec_bits,omitempty"`
	// Ask lists protected paths (a file, or a folder ending in "/") whose changes need a
	// person's approval; union across layers (asking more only narrows).
	Ask []string `yaml:"ask,omitempty" json:"ask,omitempty"`
}

// Audit says what the component records; secrets are never recorded, whatever it says.
type Audit struct {
	Emit *[]string `yaml:"emit,omitempty" json:"emit,omitempty"`
}
