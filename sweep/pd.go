package sweep

import (
	"fmt"

	"kvroute/router"
)

// PDSpec is how a fleet split into prefill and decode pools is routed: a decider and a policy
// per stage. In YAML it is a policy mapping whose name labels it and whose keys are decider,
// prefill and decode:
//
//	{name: llm-d-pd, decider: {name: prefix-based, non_cached_tokens: 16}, prefill: prefix-score, decode: prefix-score}
type PDSpec struct {
	// Decider names the decider and its parameters (router.NewDecider); default always.
	Decider PolicySpec
	// Prefill and Decode are the stages' policies.
	Prefill, Decode PolicySpec
}

var pdKeys = []string{"decider", "prefill", "decode"}

// isPDSpec reports whether a policy mapping's keys (name removed) make it a P/D spec.
func isPDSpec(m map[string]any) bool {
	for _, k := range pdKeys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// decodePDSpec reads the decider, prefill and decode keys of a policy mapping at line.
func decodePDSpec(line int, m map[string]any) (*PDSpec, error) {
	pd := &PDSpec{Decider: PolicySpec{Name: "always"}}
	for k, v := range m {
		var dst *PolicySpec
		switch k {
		case "decider":
			dst = &pd.Decider
		case "prefill":
			dst = &pd.Prefill
		case "decode":
			dst = &pd.Decode
		default:
			return nil, fmt.Errorf("line %d: policy: P/D key %q: want decider, prefill or decode", line, k)
		}
		s, err := specOf(v)
		if err != nil {
			return nil, fmt.Errorf("line %d: policy: %s: %w", line, k, err)
		}
		*dst = s
	}
	if pd.Prefill.Name == "" || pd.Decode.Name == "" {
		return nil, fmt.Errorf("line %d: policy: a P/D spec needs prefill and decode", line)
	}
	return pd, nil
}

// specOf reads a decoded YAML value as a name or a {name, params...} mapping.
func specOf(v any) (PolicySpec, error) {
	switch v := v.(type) {
	case string:
		return PolicySpec{Name: v}, nil
	case map[string]any:
		name, ok := v["name"].(string)
		if !ok || name == "" {
			return PolicySpec{}, fmt.Errorf("the mapping needs a name")
		}
		params := make(map[string]any, len(v))
		for k, x := range v {
			if k != "name" {
				params[k] = x
			}
		}
		if len(params) == 0 {
			params = nil
		}
		return PolicySpec{Name: name, Params: params}, nil
	}
	return PolicySpec{}, fmt.Errorf("want a name or a mapping {name: NAME, PARAM: VALUE, ...}")
}

func (pd *PDSpec) marshal(name string) (any, error) {
	m := map[string]any{"name": name}
	for k, s := range map[string]PolicySpec{"decider": pd.Decider, "prefill": pd.Prefill, "decode": pd.Decode} {
		v, err := s.MarshalYAML()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// BuildPD builds the P/D routing of p, its policies seeded from seed (the prefill policy
// from seed, the decode policy from seed+1<<32). A spec of one policy runs that policy on
// both stages with the always decider.
func (p PolicySpec) BuildPD(reg *router.Registry, seed uint64) (router.PDPolicy, error) {
	pd := p.PD
	if pd == nil {
		one := PolicySpec{Name: p.Name, Params: p.Params}
		pd = &PDSpec{Decider: PolicySpec{Name: "always"}, Prefill: one, Decode: one}
	}
	dec, err := router.NewDecider(pd.Decider.Name, pd.Decider.Params)
	if err != nil {
		return router.PDPolicy{}, err
	}
	pre, err := reg.New(pd.Prefill.Name, pd.Prefill.Params, seed)
	if err != nil {
		return router.PDPolicy{}, fmt.Errorf("prefill: %w", err)
	}
	de, err := reg.New(pd.Decode.Name, pd.Decode.Params, seed+1<<32)
	if err != nil {
		return router.PDPolicy{}, fmt.Errorf("decode: %w", err)
	}
	return router.PDPolicy{Prefill: pre, Decode: de, Decider: dec}, nil
}

// Check reports whether reg builds p: its policy, or its decider and both stages' policies.
func (p PolicySpec) Check(reg *router.Registry) error {
	if p.PD == nil {
		if _, ok := pdProfiles[p.Name]; ok {
			return fmt.Errorf("%s is a P/D profile, which takes no parameters: write it out as {name, decider, prefill, decode} to change it", p.Name)
		}
		_, err := reg.New(p.Name, p.Params, 1)
		return err
	}
	if _, err := p.BuildPD(reg, 1); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}
