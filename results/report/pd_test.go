package report

import (
	"fmt"
	"strings"
	"testing"

	"kvroute/results"
)

func TestPDFamilies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  []string // base: splits
	}{
		{"two splits of one fleet", []string{"pd split=2P+6D", "pd split=4P+4D", "pd split=aggregated"},
			[]string{"pd: 2P+6D 4P+4D"}},
		{"with another axis", []string{"x isl=1000,split=4P+4D", "x isl=1000,split=aggregated", "x isl=5000,split=4P+4D",
			"x isl=5000,split=aggregated"}, []string{"x isl=1000: 4P+4D", "x isl=5000: 4P+4D"}},
		{"split first", []string{"x split=8P(tp1)+2D(tp4),gpu=H200", "x split=aggregated,gpu=H200"},
			[]string{"x gpu=H200: 8P(tp1)+2D(tp4)"}},
		{"no aggregated twin", []string{"x split=4P+4D", "x split=2P+6D"}, nil},
		{"a CPU tier is not a split", []string{"x kv_offloading_size=0", "x kv_offloading_size=64"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := make([]groupPlan, len(tc.names))
			for i, n := range tc.names {
				plan[i].name = n
			}
			var got []string
			for _, f := range pdFamilies(plan) {
				var s []string
				for _, sp := range f.splits {
					s = append(s, sp.value)
				}
				got = append(got, f.base+": "+strings.Join(s, " "))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("families %q, want %q", got, tc.want)
			}
		})
	}
}

// pdCase is a synthetic sweep: per fleet split, policy and rate, the goodput (req/s) of
// three replications, each within the SLO (TTFT 2 s, TPOT 50 ms) for goodput/rate of its
// requests.
type pdCase map[string]map[string]map[float64][3]float64

func (c pdCase) runs(slo bool) []results.Run {
	var out []results.Run
	for _, split := range sortedKeys(c) {
		for _, pol := range sortedKeys(c[split]) {
			for rate, g := range c[split][pol] {
				for rep, v := range g {
					r := results.Run{
						Name: fmt.Sprintf("%s-%s-%g-%d", split, pol, rate, rep+1), Policy: pol, Group: "pd split=" + split,
						RequestRate: rate, Replication: rep + 1, Scenario: map[string]any{"fleet_split": split},
						Metrics: results.Metrics{Requests: 100, Completed: 100, TTFT: results.Dist{P99: 1000 * rate / v},
							TPOT: results.Dist{P99: 20 + v}},
					}
					if slo {
						r.Metrics.Goodput = &results.Goodput{SLO: results.SLO{TTFTMs: 2000, TPOTMs: 50}, RPS: v, Fraction: v / rate}
					}
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// TestPDAnswer checks the answer line and the section: which split and policy have the most
// goodput, and where P/D pays, loses or ties, from synthetic summaries.
func TestPDAnswer(t *testing.T) {
	// At 30 req/s the 4P+4D fleet's best (b) beats the aggregated fleet's best (a) by about 4
	// req/s; at 5 req/s it loses about 1; at 15 the two are within noise.
	sweep := pdCase{
		"aggregated": {"a": {5: {4.9, 5.0, 4.95}, 15: {12, 13, 11}, 30: {10, 10.5, 9.8}}, "b": {5: {4.5, 4.6, 4.4}, 15: {9, 9.5, 9.2}, 30: {8, 8.2, 7.9}}},
		"4P+4D":      {"a": {5: {3.8, 4.0, 3.9}, 15: {11.5, 13.5, 11.2}, 30: {12, 12.5, 12.2}}, "b": {5: {3.5, 3.7, 3.6}, 15: {10, 10.2, 10.1}, 30: {14, 14.6, 14.1}}},
		"2P+6D":      {"a": {5: {3, 3.1, 3.05}, 15: {7, 7.5, 7.2}, 30: {6, 6.3, 6.1}}, "b": {5: {2, 2.1, 2.05}, 15: {6, 6.1, 6.2}, 30: {5, 5.1, 5.2}}},
	}
	tests := []struct {
		name string
		slo  bool
		want []string
	}{
		{"with an SLO", true, []string{
			"- P/D, for **pd** (SLO: TTFT ≤ 2,000 ms, TPOT ≤ 50.0 ms), at 30 requests/s: the most goodput is **4P+4D / b**",
			"the aggregated fleet's best, a,",
			"P/D pays at 30 requests/s (4P+4D, +4.1",
			"loses at 5 requests/s (4P+4D, -1.0",
			"no significant difference at 15 requests/s (4P+4D, +0.07",
		}},
		{"without an SLO", false, []string{"- P/D, for **pd**: no SLO was set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writePDAnswer(&b, planRuns(sweep.runs(tc.slo)))
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("answer lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	// A significant loss smaller than PDMinGain of the aggregated goodput is no loss.
	tiny := pdCase{"aggregated": {"a": {10: {9.9, 9.95, 9.92}}}, "4P+4D": {"a": {10: {9.89, 9.94, 9.91}}}}
	var bt strings.Builder
	writePDAnswer(&bt, planRuns(tiny.runs(true)))
	if w := "no significant difference at 10 requests/s (4P+4D, -0.01"; !strings.Contains(bt.String(), w) {
		t.Errorf("answer lacks %q:\n%s", w, bt.String())
	}
	var b strings.Builder
	writePDSection(&b, planRuns(sweep.runs(true)))
	golden(t, "pd_section.md", []byte(b.String()))
}
