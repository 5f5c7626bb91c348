package tune

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/router"
	"kvroute/sweep"
)

// TestTablesMatchPolicies checks the bounds and fixed tables against every built-in
// policy's configuration: each entry names a numeric parameter, bounds are valid, and each
// numeric parameter is either bounded or fixed with a reason, so a new parameter cannot
// go unnoticed.
func TestTablesMatchPolicies(t *testing.T) {
	reg := router.Builtin()
	for name := range boundsTable {
		if !slices.Contains(reg.Names(), name) {
			t.Errorf("boundsTable names %s, which is not a built-in policy", name)
		}
	}
	for _, name := range reg.Names() {
		t.Run(name, func(t *testing.T) {
			cfg, err := reg.Defaults(name)
			if err != nil {
				t.Fatal(err)
			}
			fields := map[string]bool{}
			for _, f := range Fields(cfg) {
				fields[f.Key] = true
				_, bounded := boundsTable[name][f.Key]
				_, fixed := fixedTable[name][f.Key]
				if bounded == fixed {
					t.Errorf("%s: want it in exactly one of boundsTable and fixedTable (bounded %v, fixed %v)", f.Key, bounded, fixed)
				}
			}
			for key, b := range boundsTable[name] {
				if !fields[key] {
					t.Errorf("boundsTable: %s is not a numeric parameter", key)
				}
				if err := b.Validate(); err != nil {
					t.Errorf("boundsTable: %s: %v", key, err)
				}
			}
			for key := range fixedTable[name] {
				if !fields[key] {
					t.Errorf("fixedTable: %s is not a numeric parameter", key)
				}
			}
		})
	}
}

func TestFields(t *testing.T) {
	type cfg struct {
		A int             `json:"a"`
		B float64         `json:"b,omitempty"`
		C router.Duration `json:"c"`
		D *float64        `json:"d"`
		E string          `json:"e"`
		F bool            `json:"f"`
		G map[string]int  `json:"g"`
		H int64           `json:"-"`
		i int
	}
	got := Fields(cfg{A: 3, B: 0.5, C: router.Duration(1500 * 1e6), i: 1})
	want := []Field{{"a", KindInt, 3}, {"b", KindFloat, 0.5}, {"c", KindDuration, 1.5}, {"d", KindFloat, math.NaN()}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a == b || (a != a && b != b) })); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

func TestNewSpace(t *testing.T) {
	reg := router.Builtin()
	cases := []struct {
		name    string
		spec    sweep.PolicySpec
		only    []string
		want    []string // searched keys
		wantErr bool
	}{
		{"kv-router defaults", sweep.PolicySpec{Name: "kv-router"}, nil, []string{"overlap_score_credit", "prefill_load_scale", "router_temperature"}, false},
		{"a given parameter is kept", sweep.PolicySpec{Name: "kv-router", Params: map[string]any{"router_temperature": 0.2}}, nil,
			[]string{"overlap_score_credit", "prefill_load_scale"}, false},
		{"optional named", sweep.PolicySpec{Name: "kv-router"}, []string{"host_cache_hit_weight"}, []string{"host_cache_hit_weight"}, false},
		{"unbounded named", sweep.PolicySpec{Name: "kv-router"}, []string{"block_size"}, nil, true},
		{"no parameters", sweep.PolicySpec{Name: "random"}, nil, nil, false},
		{"unknown policy", sweep.PolicySpec{Name: "nope"}, nil, nil, true},
		{"bad base", sweep.PolicySpec{Name: "kv-router", Params: map[string]any{"nope": 1}}, nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSpace(reg, tc.spec, tc.only)
			if (err != nil) != tc.wantErr {
				t.Fatalf("NewSpace: err = %v, want error %v", err, tc.wantErr)
			}
			var got []string
			for _, p := range s.Params {
				got = append(got, p.Key)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("searched (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValueUnit(t *testing.T) {
	s := Space{Params: []Param{
		{Field{Key: "lin", Kind: KindFloat}, Bounds{Lo: 0, Hi: 10}},
		{Field{Key: "log", Kind: KindFloat}, Bounds{Lo: 1, Hi: 100, Log: true}},
		{Field{Key: "int", Kind: KindInt}, Bounds{Lo: 1, Hi: 8}},
		{Field{Key: "step", Kind: KindInt}, Bounds{Lo: 16, Hi: 512, Log: true, Step: 16}},
	}}
	cases := []struct {
		name string
		i    int
		u    float64
		want float64
	}{
		{"linear middle", 0, 0.5, 5},
		{"linear clamps", 0, 1.5, 10},
		{"log middle", 1, 0.5, 10},
		{"int rounds", 2, 0.3, 3},
		{"step rounds to a multiple", 3, 0.5, 96},
		{"step stays within bounds", 3, 1, 512},
		{"step low end", 3, 0, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Value(tc.i, tc.u)
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Value(%d, %v) = %v, want %v", tc.i, tc.u, got, tc.want)
			}
			if tc.u >= 0 && tc.u <= 1 && s.Params[tc.i].Kind == KindFloat {
				if u := s.Unit(tc.i, got); math.Abs(u-tc.u) > 1e-9 {
					t.Errorf("Unit(Value(%v)) = %v", tc.u, u)
				}
			}
		})
	}
	if got := s.Unit(0, math.NaN()); got != 0.5 {
		t.Errorf("Unit(NaN) = %v, want 0.5", got)
	}
}

func TestSpecKeepsBase(t *testing.T) {
	s, err := NewSpace(router.Builtin(), sweep.PolicySpec{Name: "prefix-tree", Params: map[string]any{"variant": "ray-since-pr59390"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := s.Spec(s.Defaults()) // imbalanced_threshold is unset by default: left out
	want := map[string]any{"variant": "ray-since-pr59390", "match_rate_threshold": 0.1}
	if diff := cmp.Diff(want, spec.Params); diff != "" {
		t.Errorf("Spec(defaults) (-want +got):\n%s", diff)
	}
	if _, err := router.Builtin().New(spec.Name, spec.Params, 1); err != nil {
		t.Errorf("the spec does not build: %v", err)
	}
}
