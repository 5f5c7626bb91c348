package report

import "testing"

func TestTierPairs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  []string // base@size of each pair
	}{
		{"one axis", []string{"offload kv_offloading_size=0", "offload kv_offloading_size=64"}, []string{"offload@64"}},
		{"with another axis", []string{"x gpu=L4,kv_offloading_size=0", "x gpu=L4,kv_offloading_size=32",
			"x gpu=A100,kv_offloading_size=32"}, []string{"x gpu=L4@32"}},
		{"tier first", []string{"x kv_offloading_size=0,gpu=L4", "x kv_offloading_size=8,gpu=L4"}, []string{"x gpu=L4@8"}},
		{"no twin without a tier", []string{"x kv_offloading_size=16", "x kv_offloading_size=64"}, nil},
		{"no tier axis", []string{"default", "other"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := make([]groupPlan, len(tc.names))
			for i, n := range tc.names {
				plan[i].name = n
			}
			got := tierPairs(plan)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d pairs %+v, want %v", len(got), got, tc.want)
			}
			for i, p := range got {
				if s := p.base + "@" + p.value; s != tc.want[i] {
					t.Errorf("pair %d = %s, want %s", i, s, tc.want[i])
				}
			}
		})
	}
}
