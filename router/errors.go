package router

import "errors"

// Sentinel errors returned by policies and the registry.
var (
	// ErrNoEndpoint means no endpoint of the snapshot is ready and serves the request's model.
	ErrNoEndpoint = errors.New("router: no ready endpoint serves the request")
	// ErrUnknownPolicy means the registry has no policy of that name.
	ErrUnknownPolicy = errors.New("router: unknown policy")
	// ErrDuplicatePolicy means a policy of that name is already registered.
	ErrDuplicatePolicy = errors.New("router: policy already registered")
)

// Reasons name the branch of an algorithm that made a decision.
const (
	ReasonRandom         = "random"
	ReasonRoundRobin     = "round-robin"
	ReasonLeastRequest   = "least-request"
	ReasonPowerOfTwo     = "power-of-two"
	ReasonLeastKVCache   = "least-kv-cache"
	ReasonSessionHash    = "session-hash"
	ReasonNoSession      = "no-session-least-request"
	ReasonImbalance      = "imbalance"
	ReasonPrefixMatch    = "prefix-match"
	ReasonLowMatch       = "low-match"
	ReasonNoMatch        = "no-match"
	ReasonLoadFiltered   = "prefix-match-overloaded"
	ReasonNoPrompt       = "no-prompt"
	ReasonMaxScore       = "max-score"
	ReasonRingFirst      = "ring-first"
	ReasonRingOverflow   = "ring-overflow"
	ReasonRingSaturated  = "ring-saturated"
	ReasonFairness       = "fairness"
	ReasonNoTenantRandom = "no-tenant-random"
	// ReasonAssigned marks a request routed by Lifecycle.Assign, not by a policy.
	ReasonAssigned = "assigned"
)
