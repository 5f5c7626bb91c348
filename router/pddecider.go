package router

import "fmt"

// The deciders' reasons.
const (
	// ReasonPDAlways: the always decider disaggregated.
	ReasonPDAlways = "pd-always"
	// ReasonPDNever: the never decider, or the prefix-based one with threshold 0, kept the
	// prefill local.
	ReasonPDNever = "pd-never"
	// ReasonPDUncached: enough of the prompt is uncached on the decode endpoint.
	ReasonPDUncached = "pd-uncached"
	// ReasonPDCached: too little of the prompt is uncached on the decode endpoint.
	ReasonPDCached = "pd-cached"
	// ReasonPDShortPrompt: the prompt is shorter than the prefix-based decider's
	// prompt_tokens or non_cached_tokens (or empty), whatever the decode endpoint holds.
	ReasonPDShortPrompt = "pd-short-prompt"
)

// AlwaysDeciderConfig configures the always decider: every request prefills remotely, as
// llm-d's always-disagg-pd-decider (llm-d/llm-d guides/pd-disaggregation), SGLang's PD
// router and vLLM's toy proxy run.
type AlwaysDeciderConfig struct{}

// Validate accepts every value.
func (AlwaysDeciderConfig) Validate() error { return nil }

// NeverDeciderConfig configures the never decider: every request prefills on its decode
// endpoint (a P/D fleet routed as if aggregated; the factory default of llm-d's
// prefix-based decider, non_cached_tokens 0).
type NeverDeciderConfig struct{}

// Validate accepts every value.
func (NeverDeciderConfig) Validate() error { return nil }

// PrefixDeciderConfig configures llm-d's prefix-based-pd-decider (llm-d/llm-d-router v0.10.0
// pkg/epp/framework/plugins/scheduling/profilehandler/disagg/prefix_based_pd_decider.go:105-164):
// disaggregate when the prompt has at least PromptTokens tokens (when set) and at least
// NonCachedTokens of them are not cached on the chosen decode endpoint. The prompt length is
// the request's token count (its Tokens, else InputTokens; upstream reads the tokenized
// prompt, l.167-175, and a request without one counts 0 tokens and never disaggregates);
// the cached tokens are whole cached blocks times the block size, as the decode policy's
// PrefixMatcher reports them (l.146-152: the unweighted block count, so CPU-tier hits count
// fully).
type PrefixDeciderConfig struct {
	// NonCachedTokens is the least number of prompt tokens not cached on the decode endpoint
	// for a remote prefill (nonCachedTokens); 0 never disaggregates, the factory default
	// (prefix_based_pd_decider.go:58-61, 111-113). llm-d's shipped configs set 16 (deploy/config/pd-epp-config.yaml:18-20),
	// which is this default.
	NonCachedTokens int `json:"non_cached_tokens"`
	// PromptTokens is the least prompt length in tokens for a remote prefill (promptTokens);
	// 0: any (prefix_based_pd_decider.go:124-127). Upstream's field comment speaks of characters / 4, but the code
	// compares the tokenized prompt's token count, which is what this is.
	PromptTokens int `json:"prompt_tokens"`
}

// DefaultPrefixDeciderConfig returns llm-d's shipped value, non_cached_tokens 16.
func DefaultPrefixDeciderConfig() PrefixDeciderConfig {
	return PrefixDeciderConfig{NonCachedTokens: 16}
}

// Validate reports negative thresholds.
func (c PrefixDeciderConfig) Validate() error {
	if c.NonCachedTokens < 0 || c.PromptTokens < 0 {
		return fmt.Errorf("non_cached_tokens %d, prompt_tokens %d: want >= 0", c.NonCachedTokens, c.PromptTokens)
	}
	return nil
}

// TokenCapDeciderConfig configures NVIDIA Dynamo's conditional prefill, policy token_cap
// (ai-dynamo/dynamo@0243c51b lib/kv-router/src/scheduling/config.rs: conditional_prefill_enabled
// false by default, conditional_prefill_policy token_cap by default): the prefill stays on
// the decode worker when the prompt's net-new tokens after the decode worker's device-cached
// prefix are at most BypassBelowTokens. Dynamo runs it only when conditional prefill is
// enabled; otherwise every request prefills remotely (the always decider).
type TokenCapDeciderConfig struct {
	// BypassBelowTokens is conditional_prefill_bypass_below_tokens: 5000, as the field's
	// documentation at that commit gives it. The constant behind it moves between Dynamo
	// versions (a later conditional_prefill.rs sets 1024): set it to the deployment's value.
	BypassBelowTokens int `json:"bypass_below_tokens"`
}

// DefaultTokenCapDeciderConfig returns Dynamo's default, 5000 tokens.
func DefaultTokenCapDeciderConfig() TokenCapDeciderConfig {
	return TokenCapDeciderConfig{BypassBelowTokens: 5000}
}

// Validate reports a negative cap.
func (c TokenCapDeciderConfig) Validate() error {
	if c.BypassBelowTokens < 0 {
		return fmt.Errorf("bypass_below_tokens %d: want >= 0", c.BypassBelowTokens)
	}
	return nil
}

type alwaysDecider struct{}

func (alwaysDecider) Name() string                              { return "always" }
func (alwaysDecider) Disaggregate(*Request, int) (bool, string) { return true, ReasonPDAlways }

type neverDecider struct{}

func (neverDecider) Name() string                              { return "never" }
func (neverDecider) Disaggregate(*Request, int) (bool, string) { return false, ReasonPDNever }

type prefixDecider struct{ c PrefixDeciderConfig }

func (prefixDecider) Name() string { return "prefix-based" }

// Disaggregate follows prefix_based_pd_decider.go's disaggregate (l.105-164): off when the
// threshold is 0, the prompt is shorter than PromptTokens (when set) or than NonCachedTokens,
// or fewer than NonCachedTokens of its tokens are uncached; an uncached count equal to the
// threshold disaggregates. cached may exceed the prompt (a trailing partial block counts
// whole); the prompt is then fully cached.
func (d prefixDecider) Disaggregate(req *Request, cached int) (bool, string) {
	n := isl(req)
	if d.c.NonCachedTokens == 0 {
		return false, ReasonPDNever
	}
	if n < d.c.PromptTokens || n < d.c.NonCachedTokens {
		return false, ReasonPDShortPrompt
	}
	if n-cached < d.c.NonCachedTokens {
		return false, ReasonPDCached
	}
	return true, ReasonPDUncached
}

type tokenCapDecider struct{ c TokenCapDeciderConfig }

func (tokenCapDecider) Name() string { return "token-cap" }

// Disaggregate follows TokenCapConditionalPrefillPolicy.should_bypass_remote_prefill: the
// prefill stays local when the net-new tokens, the prompt less the decode worker's device
// overlap (cached, from kv-router's MatchedTokens), are at most the cap (ai-dynamo/dynamo
// lib/kv-router/src/conditional_prefill.rs, net_new_tokens saturates at 0).
func (d tokenCapDecider) Disaggregate(req *Request, cached int) (bool, string) {
	if isl(req)-cached <= d.c.BypassBelowTokens {
		return false, ReasonPDCached
	}
	return true, ReasonPDUncached
}

// deciderFactory builds a decider from raw parameters (nil: its defaults).
type deciderFactory func(params map[string]any) (Decider, error)

// deciders holds every decider under its registry name, with its info (deciderInfos).
var deciders = builtinCatalog([]builtin[deciderFactory]{
	{"always", deciderOf(func() AlwaysDeciderConfig { return AlwaysDeciderConfig{} },
		func(AlwaysDeciderConfig) Decider { return alwaysDecider{} })},
	{"never", deciderOf(func() NeverDeciderConfig { return NeverDeciderConfig{} },
		func(NeverDeciderConfig) Decider { return neverDecider{} })},
	{"prefix-based", deciderOf(DefaultPrefixDeciderConfig,
		func(c PrefixDeciderConfig) Decider { return prefixDecider{c} })},
	{"token-cap", deciderOf(DefaultTokenCapDeciderConfig,
		func(c TokenCapDeciderConfig) Decider { return tokenCapDecider{c} })},
}, deciderInfos)

// deciderOf adapts a decider's constructor to a deciderFactory: params are decoded strictly
// over the defaults, then validated.
func deciderOf[C validator](defaults func() C, build func(C) Decider) entry[deciderFactory] {
	return entry[deciderFactory]{build: func(params map[string]any) (Decider, error) {
		cfg := defaults()
		if err := DecodeParams(params, &cfg); err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return build(cfg), nil
	}}
}

// deciderInfos is what DeciderInfos reports about each decider: the upstream code it
// reproduces and its rule in one line. docs/policies.md ("P/D routing") explains each.
var deciderInfos = map[string]PolicyInfo{
	"always": {Source: "llm-d always-disagg-pd-decider (llm-d/llm-d-router v0.10.0 pkg/epp/framework/plugins/scheduling/profilehandler/disagg/always_disagg_pd_decider.go); Dynamo without conditional prefill; SGLang's PD router; vLLM's toy proxy",
		Rule: "every request prefills on a prefill endpoint"},
	"never": {Source: "kvroute (llm-d's prefix-based decider with non_cached_tokens 0)",
		Rule: "every request prefills on its decode endpoint"},
	"prefix-based": {Source: "llm-d prefix-based-pd-decider (llm-d/llm-d-router v0.10.0 pkg/epp/framework/plugins/scheduling/profilehandler/disagg/prefix_based_pd_decider.go)",
		Rule: "remote prefill iff prompt ≥ prompt_tokens and prompt − cached blocks × block size on the decode endpoint ≥ non_cached_tokens (> 0)"},
	"token-cap": {Source: "NVIDIA Dynamo conditional prefill, policy token_cap (ai-dynamo/dynamo lib/kv-router/src/conditional_prefill.rs, scheduling/config.rs at 0243c51b)",
		Rule: "local prefill iff prompt − device-cached tokens on the decode worker ≤ bypass_below_tokens"},
}

// DeciderInfos returns each registered decider's name, source and rule, in name order.
func DeciderInfos() []PolicyInfo { return deciders.infos() }

// DeciderNames returns the registered deciders' names in ascending order.
func DeciderNames() []string { return sortedKeys(deciders) }

// NewDecider builds the decider called name with params (nil: its defaults).
func NewDecider(name string, params map[string]any) (Decider, error) {
	e, ok := deciders[name]
	if !ok {
		return nil, fmt.Errorf("router: unknown decider %q (known: %v)", name, DeciderNames())
	}
	d, err := e.build(params)
	if err != nil {
		return nil, fmt.Errorf("router: decider %s: %w", name, err)
	}
	return d, nil
}
