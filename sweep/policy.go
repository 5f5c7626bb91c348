package sweep

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// PolicySpec is a routing policy's registry name with optional parameters, keyed by the
// policy's configuration's JSON tags. In YAML it is a bare name (`prefix-cache`) or a mapping
// holding name and the parameters inline (`{name: prefix-cache, block_size: 64}`); a P/D
// spec (PDSpec), or the name of a shipped P/D profile (PDProfiles) alone. Sweep
// files list specs under policies; cmd/route reads one from its config's policy key and from
// its -policy flag, with this one decoder.
type PolicySpec struct {
	// Name is the policy's registry name ("prefix-cache").
	Name string
	// Params are the policy's parameters; nil means the policy's defaults.
	Params map[string]any
	// PD routes a fleet with prefill and decode pools; nil for a spec of one policy, which
	// such a fleet runs on both stages with the always decider (PolicySpec.BuildPD).
	PD *PDSpec
}

// UnmarshalYAML reads a name or a mapping with a name and parameters.
func (p *PolicySpec) UnmarshalYAML(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		*p = withProfile(PolicySpec{Name: n.Value})
		return nil
	case n.Kind != yaml.MappingNode:
		return fmt.Errorf("line %d: policy: want a name or a mapping {name: NAME, PARAM: VALUE, ...}", n.Line)
	}
	m, err := decodeParams(n)
	if err != nil {
		return err
	}
	s, err := specOf(m)
	if err != nil {
		return fmt.Errorf("line %d: policy: %w", n.Line, err)
	}
	if isPDSpec(s.Params) {
		pd, err := decodePDSpec(n.Line, s.Params)
		if err != nil {
			return err
		}
		*p = PolicySpec{Name: s.Name, PD: pd}
		return nil
	}
	*p = withProfile(s)
	return nil
}

// MarshalYAML writes the short form when there are no parameters.
func (p PolicySpec) MarshalYAML() (any, error) {
	if p.PD != nil {
		return p.PD.marshal(p.Name)
	}
	if len(p.Params) == 0 {
		return p.Name, nil
	}
	m := map[string]any{"name": p.Name}
	for k, v := range p.Params {
		m[k] = v
	}
	return m, nil
}

// Label is the policy's name in run names: the name, plus its parameters in key order.
func (p PolicySpec) Label() string {
	if len(p.Params) == 0 {
		return p.Name
	}
	keys := make([]string, 0, len(p.Params))
	for k := range p.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(p.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, ",%s=%v", k, p.Params[k])
	}
	return b.String()
}

// ParsePolicySpec reads one policy spec from data, YAML or JSON (a flag's value such as
// `kv-router` or `{name: kv-router, overlap_score_credit: 1}`), strictly: the document must
// hold exactly one spec.
func ParsePolicySpec(data []byte) (PolicySpec, error) {
	n, err := oneNode(data)
	if err != nil {
		return PolicySpec{}, err
	}
	var p PolicySpec
	if err := p.UnmarshalYAML(n); err != nil {
		return PolicySpec{}, fmt.Errorf("sweep: %w", err)
	}
	return p, nil
}

// ParsePolicyParams reads a mapping of policy parameters from data (YAML or JSON), as
// PolicySpec reads the parameters of its mapping form; an empty mapping gives nil.
func ParsePolicyParams(data []byte) (map[string]any, error) {
	n, err := oneNode(data)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("sweep: line %d: policy parameters: want a mapping {PARAM: VALUE, ...}", n.Line)
	}
	m, err := decodeParams(n)
	if err != nil || len(m) == 0 {
		return nil, err
	}
	return m, nil
}

// oneNode parses data as a single YAML document and returns its top node.
func oneNode(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	if len(doc.Content) != 1 {
		return nil, errors.New("sweep: empty policy spec")
	}
	return doc.Content[0], nil
}

// decodeParams decodes a mapping node of parameters.
func decodeParams(n *yaml.Node) (map[string]any, error) {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return m, nil
}
