package main

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"kvroute/results"
	"kvroute/sim"
	"kvroute/workloads"
)

// File is cmd/simulate's sweep file as the load generator reads it. Workload, arrival,
// requests, duration and seed drive the load; fleet, router and failures describe the
// simulated fleet and are only recorded, since the live target is what it is; policies name
// the run (the target decides the routing).
type File struct {
	Name     string                   `yaml:"name"`
	Seed     uint64                   `yaml:"seed"`
	Requests int                      `yaml:"requests,omitempty"`
	Duration time.Duration            `yaml:"duration,omitempty"`
	Fleet    map[string]any           `yaml:"fleet,omitempty"`
	Workload workloads.WorkloadConfig `yaml:"workload"`
	Arrival  workloads.ArrivalConfig  `yaml:"arrival"`
	Router   map[string]any           `yaml:"router,omitempty"`
	Failures []map[string]any         `yaml:"failures,omitempty"`
	Policies []PolicySpec             `yaml:"policies,omitempty"`
	SLO      SLOConfig                `yaml:"slo,omitempty"`
}

// SLOConfig sets goodput thresholds in milliseconds (0: unset), as in cmd/simulate.
type SLOConfig struct {
	TTFTMs float64 `yaml:"ttft_ms,omitempty"`
	TPOTMs float64 `yaml:"tpot_ms,omitempty"`
	E2EMs  float64 `yaml:"e2e_ms,omitempty"`
}

func (s SLOConfig) slo() results.SLO {
	return results.SLO{TTFTMs: s.TTFTMs, TPOTMs: s.TPOTMs, E2EMs: s.E2EMs}
}

// PolicySpec is a policy name with optional parameters, as in cmd/simulate.
type PolicySpec struct {
	Name   string
	Params map[string]any
}

// UnmarshalYAML reads a name or a mapping with a name and parameters.
func (p *PolicySpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		p.Name = n.Value
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	name, ok := m["name"].(string)
	if !ok || name == "" {
		return fmt.Errorf("line %d: policy needs a name", n.Line)
	}
	delete(m, "name")
	p.Name, p.Params = name, m
	return nil
}

// MarshalYAML writes the short form when there are no parameters.
func (p PolicySpec) MarshalYAML() (any, error) {
	if len(p.Params) == 0 {
		return p.Name, nil
	}
	m := map[string]any{"name": p.Name}
	for k, v := range p.Params {
		m[k] = v
	}
	return m, nil
}

// Label is the policy's name in run names, exactly as cmd/simulate writes it: the name,
// then its parameters in key order.
func (p PolicySpec) Label() string {
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

// Point is one load level (or other workload variant) of the file: every swept field fixed.
type Point struct {
	File
	Axes []AxisValue
}

// AxisValue is one swept field's value at a point.
type AxisValue struct {
	Path, Value string
}

// Label names a point by its axis values, as cmd/simulate does ("base" when nothing is swept).
func (p Point) Label() string {
	if len(p.Axes) == 0 {
		return "base"
	}
	parts := make([]string, len(p.Axes))
	for i, a := range p.Axes {
		parts[i] = a.Path[strings.LastIndexByte(a.Path, '.')+1:] + "=" + a.Value
	}
	return strings.Join(parts, ",")
}

// group names the runs plotted together, as cmd/simulate does: the point without its rate.
func (p Point) group() string {
	var parts []string
	for _, a := range p.Axes {
		if a.Path != "arrival.rate" {
			parts = append(parts, a.Path[strings.LastIndexByte(a.Path, '.')+1:]+"="+a.Value)
		}
	}
	if len(parts) == 0 {
		return p.Name
	}
	return p.Name + " " + strings.Join(parts, ",")
}

// workload returns the point's workload configuration.
func (p Point) workload() workloads.Config {
	return workloads.Config{Workload: p.Workload, Arrival: p.Arrival, Requests: p.Requests, Duration: p.Duration}
}

// workloadSeed is the seed cmd/simulate gives the point's workload: the same file sends the
// same requests in both.
func (p Point) workloadSeed() uint64 { return sim.SubSeed(p.Seed, "workload") }

// model is fleet.model, or "" when the file names none.
func (p Point) model() string {
	m, _ := p.Fleet["model"].(string)
	return m
}

// Parse reads a sweep file strictly and expands its workload, arrival, requests, duration
// and seed axes into points, in file order with the last axis fastest. Lists under fleet and
// router are simulator axes: they are kept as recorded values and do not multiply the runs.
// name labels errors.
func Parse(data []byte, name string) ([]Point, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping at the top level", name)
	}
	var points []Point
	err := expand(collectAxes(root.Content[0], ""), 0, nil, func(vals []AxisValue) error {
		f, err := decodeStrict(root.Content[0], name)
		if err != nil {
			return err
		}
		points = append(points, Point{File: f, Axes: append([]AxisValue(nil), vals...)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, p := range points {
		if err := p.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, p.Label(), err))
		}
	}
	return points, errors.Join(errs...)
}

type axis struct {
	path   string
	parent *yaml.Node
	index  int
	values []*yaml.Node
}

// collectAxes finds the scalar lists that are load axes.
func collectAxes(m *yaml.Node, prefix string) []axis {
	var out []axis
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i].Value, m.Content[i+1]
		path := strings.TrimPrefix(prefix+"."+key, ".")
		switch {
		case prefix == "" && (key == "workload" || key == "arrival") && val.Kind == yaml.MappingNode:
			out = append(out, collectAxes(val, key)...)
		case (prefix != "" || key == "requests" || key == "duration" || key == "seed") && isScalarList(val):
			out = append(out, axis{path: path, parent: m, index: i + 1, values: val.Content})
		}
	}
	return out
}

func isScalarList(n *yaml.Node) bool {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return false
	}
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// expand visits every combination of axis values with the document edited in place.
func expand(axes []axis, k int, vals []AxisValue, visit func([]AxisValue) error) error {
	if k == len(axes) {
		return visit(vals)
	}
	a := axes[k]
	orig := a.parent.Content[a.index]
	defer func() { a.parent.Content[a.index] = orig }()
	for _, v := range a.values {
		a.parent.Content[a.index] = v
		if err := expand(axes, k+1, append(vals, AxisValue{a.path, v.Value}), visit); err != nil {
			return err
		}
	}
	return nil
}

func decodeStrict(doc *yaml.Node, name string) (File, error) {
	var buf bytes.Buffer
	if err := yaml.NewEncoder(&buf).Encode(doc); err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// validate checks what a live run needs: a name, an end, a valid workload and SLO.
func (p Point) validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("name: required"))
	}
	if p.Requests <= 0 && p.Duration <= 0 {
		errs = append(errs, errors.New("requests or duration: one is required, so the run ends"))
	}
	if err := p.workload().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := p.SLO.slo().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("slo: %w", err))
	}
	for i, ps := range p.Policies {
		if ps.Name == "" {
			errs = append(errs, fmt.Errorf("policies[%d]: no name", i))
		}
	}
	return errors.Join(errs...)
}
