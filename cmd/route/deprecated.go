package main

import (
	"fmt"

	"kvroute/internal/strictyaml"

	"go.yaml.in/yaml/v3"
)

// decodeYAML decodes data over c strictly: an unknown field is an error that names it. The
// deprecated spellings (policy_params, health.scrape_interval) are first rewritten to the
// current ones (migrate), each adding a warning to c.deprecated.
func decodeYAML(data []byte, c *fileConfig) error {
	doc, err := strictyaml.Parse(data)
	if err != nil || doc == nil || len(doc.Content) == 0 { // nil: an empty file
		return err
	}
	warnings, err := migrate(doc.Content[0], c.Policy.Name)
	if err != nil {
		return err
	}
	if err := strictyaml.DecodeNode(doc, c); err != nil {
		return err
	}
	c.deprecated = append(c.deprecated, warnings...)
	return nil
}

// migrate rewrites, in the top mapping of a route config, the deprecated spellings to the
// current ones and returns a warning for each: policy: NAME with policy_params: {...} becomes
// policy: {name: NAME, ...} (NAME defaults to defaultPolicy), health.scrape_interval becomes
// health.metrics_interval. Giving both spellings of one setting is an error naming the line.
func migrate(top *yaml.Node, defaultPolicy string) ([]string, error) {
	if top.Kind != yaml.MappingNode {
		return nil, nil // the strict decoder reports the shape
	}
	var warnings []string
	if params := valueOf(top, "policy_params"); params != nil {
		if err := mergePolicyParams(top, params, defaultPolicy); err != nil {
			return nil, err
		}
		warnings = append(warnings, "policy_params is deprecated: write policy: {name: NAME, PARAM: VALUE, ...}")
	}
	if h := valueOf(top, "health"); h != nil && h.Kind == yaml.MappingNode {
		if old := keyOf(h, "scrape_interval"); old != nil {
			if keyOf(h, "metrics_interval") != nil {
				return nil, fmt.Errorf("line %d: health: scrape_interval and metrics_interval: give metrics_interval only", old.Line)
			}
			old.Value = "metrics_interval"
			warnings = append(warnings, "health.scrape_interval is deprecated: write health.metrics_interval")
		}
	}
	return warnings, nil
}

// mergePolicyParams moves the policy_params mapping into the policy key's mapping form.
func mergePolicyParams(top, params *yaml.Node, defaultPolicy string) error {
	policy := valueOf(top, "policy")
	if policy != nil && policy.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: policy_params with a policy mapping: put the parameters in the mapping", params.Line)
	}
	if params.Kind != yaml.MappingNode && params.Tag != "!!null" {
		return fmt.Errorf("line %d: policy_params: want a mapping", params.Line)
	}
	name := defaultPolicy
	if policy != nil {
		name = policy.Value
	}
	spec := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: params.Line, Column: params.Column, Content: append([]*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "name"}, {Kind: yaml.ScalarNode, Tag: "!!str", Value: name},
	}, params.Content...)}
	var kept []*yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if k := top.Content[i].Value; k != "policy" && k != "policy_params" {
			kept = append(kept, top.Content[i], top.Content[i+1])
		}
	}
	top.Content = append(kept, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "policy"}, spec)
	return nil
}

// keyOf returns the key node of key in mapping m, or nil.
func keyOf(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return nil
}

// valueOf returns the value node of key in mapping m, or nil.
func valueOf(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
