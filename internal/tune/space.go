package tune

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"kvroute/router"
	"kvroute/sweep"
)

// Kind is how a parameter is written in a policy's parameters.
type Kind string

// The kinds of numeric parameters.
const (
	KindFloat    Kind = "float"
	KindInt      Kind = "int"
	KindDuration Kind = "duration" // a router.Duration, searched and written in seconds
)

// Field is a numeric field of a policy's configuration, found by reflection.
type Field struct {
	// Key is the field's json tag: the parameter's name.
	Key  string
	Kind Kind
	// Default is the field's value in the configuration it was read from (seconds for a
	// duration); NaN for an unset optional value (a nil pointer).
	Default float64
}

var durationType = reflect.TypeFor[router.Duration]()

// Fields lists the numeric fields of cfg, a policy configuration struct, in field order:
// ints, floats, router.Durations and pointers to them. Strings, booleans and maps are not
// searched.
func Fields(cfg any) []Field {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out []Field
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || key == "" || key == "-" {
			continue
		}
		if f, ok := numeric(v.Field(i)); ok {
			f.Key = key
			out = append(out, f)
		}
	}
	return out
}

// numeric reads a field's value when its type is numeric.
func numeric(v reflect.Value) (Field, bool) {
	if v.Kind() == reflect.Pointer {
		if _, ok := numeric(reflect.Zero(v.Type().Elem())); !ok {
			return Field{}, false
		}
		if v.IsNil() {
			f, _ := numeric(reflect.Zero(v.Type().Elem()))
			f.Default = math.NaN()
			return f, true
		}
		return numeric(v.Elem())
	}
	switch {
	case v.Type() == durationType:
		return Field{Kind: KindDuration, Default: v.Interface().(router.Duration).D().Seconds()}, true
	case v.Type().PkgPath() != "": // another named type: not a plain number
		return Field{}, false
	case v.CanInt():
		return Field{Kind: KindInt, Default: float64(v.Int())}, true
	case v.CanUint():
		return Field{Kind: KindInt, Default: float64(v.Uint())}, true
	case v.CanFloat():
		return Field{Kind: KindFloat, Default: v.Float()}, true
	}
	return Field{}, false
}

// Param is a parameter the search varies within its bounds.
type Param struct {
	Field
	Bounds
}

// Fixed is a numeric parameter left at its value, with the reason.
type Fixed struct {
	Field
	Reason string `json:"reason"`
}

// Space is what a search varies: a policy's searched parameters over its base parameters.
type Space struct {
	// Policy is the policy's registry name.
	Policy string
	// Base are the policy's parameters as the spec gave them (nil: its defaults); every
	// candidate sets its searched parameters over them.
	Base map[string]any
	// Params are searched, Fixed are not.
	Params []Param
	Fixed  []Fixed
}

// NewSpace finds the numeric parameters of spec's policy in reg and bounds them from the
// table (bounds.go). only, when not empty, names the parameters to search (any with bounds,
// optional ones included); otherwise every bounded parameter that is not optional is.
func NewSpace(reg *router.Registry, spec sweep.PolicySpec, only []string) (Space, error) {
	cfg, err := reg.Defaults(spec.Name)
	if err != nil {
		return Space{}, fmt.Errorf("tune: %w", err)
	}
	pcfg := reflect.New(reflect.TypeOf(cfg))
	pcfg.Elem().Set(reflect.ValueOf(cfg))
	if err := router.DecodeParams(spec.Params, pcfg.Interface()); err != nil {
		return Space{}, fmt.Errorf("tune: policy %s: %w", spec.Name, err)
	}
	s := Space{Policy: spec.Name, Base: maps.Clone(spec.Params)}
	table := boundsTable[spec.Name]
	want := map[string]bool{}
	for _, k := range only {
		want[k] = true
	}
	for _, f := range Fields(pcfg.Interface()) {
		b, bounded := table[f.Key]
		_, given := spec.Params[f.Key]
		switch {
		case len(only) > 0 && want[f.Key] && bounded:
			s.Params = append(s.Params, Param{f, b})
			delete(want, f.Key)
		case len(only) == 0 && bounded && !b.Optional && !given:
			s.Params = append(s.Params, Param{f, b})
		default:
			s.Fixed = append(s.Fixed, Fixed{f, fixedReason(spec.Name, f.Key, bounded, given)})
		}
	}
	if len(want) > 0 {
		return Space{}, fmt.Errorf("tune: policy %s: no search bounds for %v (bounded: %v)", spec.Name,
			slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(table)))
	}
	return s, nil
}

// fixedReason says why a parameter is not searched.
func fixedReason(policy, key string, bounded, given bool) string {
	switch {
	case given:
		return "given in the policy spec"
	case bounded && boundsTable[policy][key].Optional:
		return "optional: " + boundsTable[policy][key].Note
	case bounded:
		return "not named in the parameters to search"
	}
	if r, ok := fixedTable[policy][key]; ok {
		return r
	}
	return "no search bounds"
}

// Dim is the number of searched parameters.
func (s Space) Dim() int { return len(s.Params) }

// Value maps u in [0, 1] to parameter i's value: linear or logarithmic between its bounds,
// then rounded to its step (whole numbers for an int).
func (s Space) Value(i int, u float64) float64 {
	p := s.Params[i]
	u = min(max(u, 0), 1)
	v := p.Lo + u*(p.Hi-p.Lo)
	if p.Log {
		v = math.Exp(math.Log(p.Lo) + u*(math.Log(p.Hi)-math.Log(p.Lo)))
	}
	step := p.Step
	if step == 0 && p.Kind == KindInt {
		step = 1
	}
	if step > 0 {
		v = math.Round(v/step) * step
		for v < p.Lo {
			v += step
		}
		for v > p.Hi {
			v -= step
		}
	}
	return v
}

// Unit maps parameter i's value v back into [0, 1] (clamped): the inverse of Value before
// rounding. An unset value (NaN) maps to the middle.
func (s Space) Unit(i int, v float64) float64 {
	p := s.Params[i]
	if math.IsNaN(v) {
		return 0.5
	}
	u := (v - p.Lo) / (p.Hi - p.Lo)
	if p.Log {
		u = (math.Log(max(v, p.Lo)) - math.Log(p.Lo)) / (math.Log(p.Hi) - math.Log(p.Lo))
	}
	return min(max(u, 0), 1)
}

// Values maps a point of the unit cube to the parameters' values.
func (s Space) Values(u []float64) []float64 {
	out := make([]float64, len(u))
	for i := range u {
		out[i] = s.Value(i, u[i])
	}
	return out
}

// Defaults are the searched parameters' values before the search (NaN: unset).
func (s Space) Defaults() []float64 {
	out := make([]float64, len(s.Params))
	for i, p := range s.Params {
		out[i] = p.Default
	}
	return out
}

// Spec is the policy spec of values: the base parameters with the searched ones set (an
// unset value, NaN, left out).
func (s Space) Spec(values []float64) sweep.PolicySpec {
	params := maps.Clone(s.Base)
	for i, p := range s.Params {
		if math.IsNaN(values[i]) {
			continue
		}
		if params == nil {
			params = map[string]any{}
		}
		params[p.Key] = p.param(values[i])
	}
	return sweep.PolicySpec{Name: s.Policy, Params: params}
}

// param is a value as the policy's parameters take it.
func (p Param) param(v float64) any {
	if p.Kind == KindInt {
		return int64(math.Round(v))
	}
	return v
}

// Key identifies values: two candidates with the same key are the same policy.
func (s Space) Key(values []float64) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = s.Params[i].Key + "=" + strconv.FormatFloat(v, 'g', 8, 64)
	}
	return strings.Join(parts, ",")
}

// Validate checks the bounds: finite, Lo < Hi, Lo > 0 on a log scale, a step ≥ 0.
func (b Bounds) Validate() error {
	var errs []error
	if math.IsNaN(b.Lo) || math.IsNaN(b.Hi) || math.IsInf(b.Lo, 0) || math.IsInf(b.Hi, 0) || !(b.Lo < b.Hi) {
		errs = append(errs, fmt.Errorf("bounds [%v, %v]: want finite lo < hi", b.Lo, b.Hi))
	}
	if b.Log && !(b.Lo > 0) {
		errs = append(errs, fmt.Errorf("bounds [%v, %v]: a log scale needs lo > 0", b.Lo, b.Hi))
	}
	if !(b.Step >= 0) {
		errs = append(errs, fmt.Errorf("step %v: want >= 0", b.Step))
	}
	return errors.Join(errs...)
}
