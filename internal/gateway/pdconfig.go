package gateway

import (
	"errors"
	"fmt"
	"slices"
)

// P/D modes: who runs vLLM's NIXL two-step.
const (
	// PDTwoStep: the gateway runs the two-step itself, as vLLM's toy proxy does: a prefill leg
	// to the prefill backend, then the decode leg, with the returned kv_transfer_params, to the
	// decode backend; only the decode leg's response reaches the client.
	PDTwoStep = "two-step"
	// PDSidecar: the gateway names the prefill backend in llm-d's x-prefiller-host-port header
	// and forwards the request to the decode backend only, whose llm-d routing sidecar runs
	// the two-step (llm-d/llm-d-router@ebab6879 pkg/common/routing/common.go:14).
	PDSidecar = "sidecar"
)

// Backend roles in a P/D fleet.
const (
	// RolePrefill backends serve prefill legs only.
	RolePrefill = "prefill"
	// RoleDecode backends serve decode legs, and prefill locally when the decider says so.
	RoleDecode = "decode"
)

// PDConfig splits the backends into prefill and decode pools. With Mode empty the gateway
// routes every backend as one aggregated pool.
type PDConfig struct {
	// Mode is "" (no P/D), two-step or sidecar.
	Mode string `yaml:"mode" json:"mode"`
	// Roles gives, by backend name or URL, a backend's role: prefill or decode. A backend left
	// out is aggregated and joins the decode pool, as llm-d's decode filter admits pods with
	// no role label while its prefill filter does not
	// (llm-d/llm-d-router@ebab6879 pkg/epp/framework/plugins/scheduling/filter/bylabel/roles.go:47,57).
	Roles map[string]string `yaml:"roles" json:"roles"`
	// Decider names the decider and its parameters (router.NewDecider); empty: always.
	Decider PolicyRef `yaml:"-" json:"-"`
	// Prefill and Decode are the stages' policies; empty names mean Config.Policy with its
	// parameters on both stages. cmd/route fills these from its policy spec's P/D form.
	Prefill, Decode PolicyRef `yaml:"-" json:"-"`
	// Name labels the P/D policy in metrics (the spec's name); empty: Config.Policy.
	Name string `yaml:"-" json:"-"`
}

// PolicyRef names a registered policy or decider and its parameters (nil: defaults).
type PolicyRef struct {
	Name   string
	Params map[string]any
}

// On reports whether the gateway routes a P/D fleet.
func (p PDConfig) On() bool { return p.Mode != "" }

// validate checks the mode and roles against the backends.
func (p PDConfig) validate(specs []backendSpec) error {
	if !p.On() {
		if len(p.Roles) > 0 {
			return errors.New("pd.roles: set without pd.mode")
		}
		return nil
	}
	var errs []error
	if p.Mode != PDTwoStep && p.Mode != PDSidecar {
		errs = append(errs, fmt.Errorf("pd.mode %q: want %s or %s", p.Mode, PDTwoStep, PDSidecar))
	}
	decoders := 0
	for _, s := range specs {
		if roleOf(p.Roles, s) != RolePrefill {
			decoders++
		}
	}
	if decoders == 0 {
		errs = append(errs, errors.New("pd.roles: every backend is prefill: want at least one decode backend"))
	}
	keys := make([]string, 0, len(p.Roles))
	for k := range p.Roles {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if r := p.Roles[k]; r != RolePrefill && r != RoleDecode {
			errs = append(errs, fmt.Errorf("pd.roles[%s] %q: want %s or %s", k, r, RolePrefill, RoleDecode))
		}
		if !slices.ContainsFunc(specs, func(s backendSpec) bool { return s.name == k || s.url == k }) {
			errs = append(errs, fmt.Errorf("pd.roles[%s]: no backend has that name or URL", k))
		}
	}
	return errors.Join(errs...)
}

// roleOf returns the role roles give the backend s, by name, then by URL; "" when none.
func roleOf(roles map[string]string, s backendSpec) string {
	if r, ok := roles[s.name]; ok {
		return r
	}
	return roles[s.url]
}
