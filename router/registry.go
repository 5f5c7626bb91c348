package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Factory builds a policy from raw parameters (as decoded from YAML or JSON: nil means all
// defaults) and a seeded random source owned by the new policy.
type Factory func(params map[string]any, rng *rand.Rand) (Policy, error)

// Registry maps policy names to factories. It is a value: callers build their own (Builtin
// gives one with every policy of this package) and nothing is registered globally.
type Registry struct {
	policies catalog[Factory]
}

// PolicyInfo describes a registered policy for listings (simulate -list, route -list-policies).
type PolicyInfo struct {
	// Name is the registry name.
	Name string
	// Source names what the policy reproduces: upstream project, release or commit, and file
	// ("kvroute" for policies of our own).
	Source string
	// Rule is the decision rule in one line.
	Rule string
	// Variants lists the values of the policy's `variant` parameter, the default first; nil
	// when upstream versions do not differ.
	Variants []string
}

// String formats the info as one line: name, source, rule and variants.
func (i PolicyInfo) String() string {
	s := i.Name + "\t" + i.Source + "\t" + i.Rule
	if len(i.Variants) > 0 {
		s += " (variant: " + strings.Join(i.Variants, " | ") + ")"
	}
	return s
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{policies: catalog[Factory]{}}
}

// Register adds a factory under name; it fails with ErrDuplicatePolicy if name is taken.
func (r *Registry) Register(name string, f Factory) error {
	return r.RegisterInfo(PolicyInfo{Name: name}, f)
}

// RegisterInfo adds a factory under info.Name and records info for Info.
func (r *Registry) RegisterInfo(info PolicyInfo, f Factory) error {
	if info.Name == "" || f == nil {
		return fmt.Errorf("router: register: empty name or nil factory")
	}
	return r.policies.add(info, entry[Factory]{build: f})
}

// Info returns what was registered about each policy, sorted by name.
func (r *Registry) Info() []PolicyInfo { return r.policies.infos() }

// Names returns the registered names in ascending order.
func (r *Registry) Names() []string { return sortedKeys(r.policies) }

// New builds the policy called name with params, seeding its random source from seed.
func (r *Registry) New(name string, params map[string]any, seed uint64) (Policy, error) {
	e, ok := r.policies[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownPolicy, name, r.Names())
	}
	p, err := e.build(params, NewRand(seed))
	if err != nil {
		return nil, fmt.Errorf("router: policy %s: %w", name, err)
	}
	return p, nil
}

// NewRand returns the random source the registry gives a policy built with seed.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Builtin returns a registry holding every policy of this package under its documented name.
func Builtin() *Registry {
	return &Registry{policies: builtinCatalog(builtins(), policyInfos)}
}

// Defaults returns a new value of the configuration the policy called name decodes its
// parameters into, holding its defaults: a struct whose json tags are the parameter names.
// It fails with ErrUnknownPolicy for a name that is not registered, or that was registered
// without its configuration (Register, RegisterInfo).
func (r *Registry) Defaults(name string) (any, error) {
	e, ok := r.policies[name]
	if !ok || e.defaults == nil {
		return nil, fmt.Errorf("%w: %q has no known configuration", ErrUnknownPolicy, name)
	}
	return e.defaults(), nil
}

// catalog is what a registry holds, by name: the policies of a Registry (F is Factory) and
// the P/D deciders (pddecider.go).
type catalog[F any] map[string]entry[F]

// entry is a builder F with what was registered about it: its info and, for the built-in
// policies, the defaults of the configuration it decodes into (nil otherwise).
type entry[F any] struct {
	build    F
	info     PolicyInfo
	defaults func() any
}

// add records e under info.Name; it fails with ErrDuplicatePolicy if the name is taken.
func (c catalog[F]) add(info PolicyInfo, e entry[F]) error {
	if _, ok := c[info.Name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicatePolicy, info.Name)
	}
	e.info = info
	c[info.Name] = e
	return nil
}

// infos returns what was registered about each entry, sorted by name.
func (c catalog[F]) infos() []PolicyInfo {
	out := make([]PolicyInfo, 0, len(c))
	for _, n := range sortedKeys(c) {
		out = append(out, c[n].info)
	}
	return out
}

// builtin is one entry of a built-in catalog: its registry name and its builder.
type builtin[F any] struct {
	name  string
	entry entry[F]
}

// builtinCatalog returns the entries in a catalog, each with its info from infos under its
// name (the name alone when infos has none). A duplicate name is a programming error: it panics.
func builtinCatalog[F any](entries []builtin[F], infos map[string]PolicyInfo) catalog[F] {
	c := catalog[F]{}
	for _, e := range entries {
		info := infos[e.name]
		info.Name = e.name
		if err := c.add(info, e.entry); err != nil {
			panic(err)
		}
	}
	return c
}

func builtins() []builtin[Factory] {
	return []builtin[Factory]{
		{"random", factoryOf(DefaultRandomConfig, NewRandom)},
		{"round-robin", factoryOf(DefaultRoundRobinConfig, NewRoundRobin)},
		{"least-request", factoryOf(DefaultLeastRequestConfig, NewLeastRequest)},
		{"power-of-two", factoryOf(DefaultPowerOfTwoConfig, NewPowerOfTwo)},
		{"least-kv-cache", factoryOf(DefaultLeastKVCacheConfig, NewLeastKVCache)},
		{"session-affinity", factoryOf(DefaultSessionAffinityConfig, NewSessionAffinity)},
		{"prefix-cache", factoryOf(DefaultPrefixCacheConfig, NewPrefixCache)},
		{"prefix-tree", factoryOf(DefaultPrefixTreeConfig, NewPrefixTree)},
		{"prefix-score", factoryOf(DefaultPrefixScoreConfig, NewPrefixScore)},
		{"precise-prefix", factoryOf(DefaultPrecisePrefixConfig, NewPrecisePrefix)},
		{"cache-aware", factoryOf(DefaultCacheAwareConfig, NewCacheAware)},
		{"chwbl", factoryOf(DefaultCHWBLConfig, NewCHWBL)},
		{"vtc-basic", factoryOf(DefaultVTCConfig, NewVTC)},
		// Policies the field adopted in 2025–2026; each names its upstream source in its
		// configuration's doc comment.
		{"lmetric", factoryOf(DefaultLMetricConfig, NewLMetric)},
		{"kv-router", factoryOf(DefaultKVRouterConfig, NewKVRouter)},
		{"token-load", factoryOf(DefaultTokenLoadConfig, NewTokenLoad)},
		// kvroute's own.
		{"predicted-ttft", factoryOf(DefaultPredictedTTFTConfig, NewPredictedTTFT)},
	}
}

// validator is implemented by every policy configuration.
type validator interface{ Validate() error }

// factoryOf adapts a typed constructor to a Factory: params are decoded strictly over the
// defaults, then validated by the constructor.
func factoryOf[C validator, P Policy](defaults func() C, build func(C, *rand.Rand) (P, error)) entry[Factory] {
	return entry[Factory]{build: func(params map[string]any, rng *rand.Rand) (Policy, error) {
		cfg := defaults()
		if err := DecodeParams(params, &cfg); err != nil {
			return nil, err
		}
		return build(cfg, rng)
	}, defaults: func() any { return defaults() }}
}

// DecodeParams decodes raw parameters over cfg (which holds the defaults), rejecting unknown
// fields. Keys are the configuration's json tags (snake_case).
func DecodeParams(params map[string]any, cfg any) error {
	if len(params) == 0 {
		return nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("router: params: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("router: params: %w", err)
	}
	return nil
}

// sortedKeys returns m's keys in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
