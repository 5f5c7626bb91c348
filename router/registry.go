package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// Factory builds a policy from raw parameters (as decoded from YAML or JSON: nil means all
// defaults) and a seeded random source owned by the new policy.
type Factory func(params map[string]any, rng *rand.Rand) (Policy, error)

// Registry maps policy names to factories. It is a value: callers build their own (Builtin
// gives one with every policy of this package) and nothing is registered globally.
type Registry struct {
	factories map[string]Factory
	infos     map[string]PolicyInfo
	defaults  map[string]func() any
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
	return &Registry{factories: make(map[string]Factory), infos: make(map[string]PolicyInfo), defaults: make(map[string]func() any)}
}

// Register adds a factory under name; it fails with ErrDuplicatePolicy if name is taken.
func (r *Registry) Register(name string, f Factory) error {
	return r.RegisterInfo(PolicyInfo{Name: name}, f)
}

// RegisterInfo adds a factory under info.Name and records info for Info.
func (r *Registry) RegisterInfo(info PolicyInfo, f Factory) error {
	name := info.Name
	if name == "" || f == nil {
		return fmt.Errorf("router: register: empty name or nil factory")
	}
	if _, ok := r.factories[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicatePolicy, name)
	}
	r.factories[name] = f
	r.infos[name] = info
	return nil
}

// Info returns what was registered about each policy, sorted by name.
func (r *Registry) Info() []PolicyInfo {
	out := make([]PolicyInfo, 0, len(r.infos))
	for _, n := range r.Names() {
		out = append(out, r.infos[n])
	}
	return out
}

// Names returns the registered names in ascending order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the policy called name with params, seeding its random source from seed.
func (r *Registry) New(name string, params map[string]any, seed uint64) (Policy, error) {
	f, ok := r.factories[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownPolicy, name, r.Names())
	}
	p, err := f(params, NewRand(seed))
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
	r := NewRegistry()
	for _, e := range builtins() {
		info, ok := policyInfos[e.name]
		if !ok {
			info = PolicyInfo{Name: e.name}
		}
		info.Name = e.name
		if err := r.RegisterInfo(info, e.typed.factory); err != nil {
			panic(err) // a duplicate among the built-ins is a programming error
		}
		r.defaults[e.name] = e.typed.defaults
	}
	return r
}

// Defaults returns a new value of the configuration the policy called name decodes its
// parameters into, holding its defaults: a struct whose json tags are the parameter names.
// It fails with ErrUnknownPolicy for a name that is not registered, or that was registered
// without its configuration (Register, RegisterInfo).
func (r *Registry) Defaults(name string) (any, error) {
	d, ok := r.defaults[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q has no known configuration", ErrUnknownPolicy, name)
	}
	return d(), nil
}

type builtin struct {
	name  string
	typed typedFactory
}

// typedFactory is a Factory with the defaults of the configuration it decodes into.
type typedFactory struct {
	factory  Factory
	defaults func() any
}

func builtins() []builtin {
	return []builtin{
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
func factoryOf[C validator, P Policy](defaults func() C, build func(C, *rand.Rand) (P, error)) typedFactory {
	return typedFactory{factory: func(params map[string]any, rng *rand.Rand) (Policy, error) {
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
