package report

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"kvroute/results"
)

// measuredRuns builds one replication of each policy with no configured rate: each run's
// measured rate differs, as closed-loop sessions or tenant mixes make it.
func measuredRuns(policies []string, tenants bool) []results.Run {
	var runs []results.Run
	for i, p := range policies {
		m := results.Metrics{Requests: 100, Completed: 100, HitRate: 0.5, JainFairness: 0.6,
			TTFT: results.Dist{P50: 50 + float64(i), P99: 100 + 10*float64(i)}}
		if tenants {
			m.Tenants = map[string]results.TenantMetrics{
				"alice": {Requests: 10, Completed: 10, Service: 1000, TTFT: results.Dist{P50: 40, P99: 90 + float64(i)}},
				"bob":   {Requests: 10, Completed: 10, Service: 1000, TTFT: results.Dist{P50: 45, P99: 95 + float64(i)}},
				"flood": {Requests: 80, Completed: 80, Service: 8000, TTFT: results.Dist{P50: 60, P99: 300}},
			}
		}
		runs = append(runs, results.Run{Name: p, Policy: p, Group: "mix", RequestRate: 32 + 0.01*float64(i), RateMeasured: true,
			Scenario: map[string]any{"workload": "mix"}, Metrics: m})
	}
	return runs
}

func TestRunsCompareAtTheirConfiguredPoint(t *testing.T) {
	policies := []string{"round-robin", "least-request", "prefix-score", "kv-router"}
	tests := []struct {
		name    string
		runs    []results.Run
		levels  int
		want    []string
		reject  []string
		section bool // Fairness
	}{
		{"measured rates are one point", measuredRuns(policies, false), 1,
			[]string{"at its configured arrivals (no single rate)", "round-robin 100 ms", "least-request", "kv-router"},
			[]string{"Only one policy ran", "At lower rates"}, false},
		{"tenants answer on fairness", measuredRuns(policies, true), 1,
			[]string{"Fairness, for the well-behaved tenants (alice, bob) while flood floods", "round-robin 95.0 ms"},
			[]string{"Only one policy ran"}, true},
		{"configured rates are levels", repRuns([]repSpec{{"a", []float64{100, 110}, false}, {"b", []float64{200, 210}, false}}, 8, 16), 2,
			[]string{"at its highest load, 16 requests/s", "At lower rates (requests/s), by p99 TTFT: 8:"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planRuns(tc.runs)
			if len(plan) != 1 || len(plan[0].levels) != tc.levels {
				t.Fatalf("%d groups, levels %+v; want 1 group of %d levels", len(plan), plan[0].levels, tc.levels)
			}
			for _, l := range plan[0].levels {
				if len(l.cells) != len(plan[0].policies) {
					t.Errorf("level %s compares %d policies, want all %d", l.key, len(l.cells), len(plan[0].policies))
				}
			}
			report, err := buildReport(tc.runs, plan, nil)
			if err != nil {
				t.Fatal(err)
			}
			answer := string(report[:strings.Index(string(report), SectionVerdict)])
			for _, w := range tc.want {
				if !strings.Contains(answer, w) {
					t.Errorf("answer lacks %q:\n%s", w, answer)
				}
			}
			for _, r := range tc.reject {
				if strings.Contains(answer, r) {
					t.Errorf("answer holds %q:\n%s", r, answer)
				}
			}
			if got := strings.Contains(string(report), "\n"+SectionFairness+"\n"); got != tc.section {
				t.Errorf("Fairness section present %v, want %v", got, tc.section)
			}
		})
	}
}

func TestFlooder(t *testing.T) {
	tm := func(reqs ...int) map[string]results.TenantMetrics {
		out := map[string]results.TenantMetrics{}
		for i, n := range reqs {
			out[fmt.Sprintf("t%d", i)] = results.TenantMetrics{Requests: n, Completed: n, TTFT: results.Dist{P99: float64(10 * (i + 1))}}
		}
		return out
	}
	tests := []struct {
		name      string
		tenants   map[string]results.TenantMetrics
		flood     string
		wellP99   float64 // the slowest well-behaved tenant's p99
		wellknown bool
	}{
		{"one floods", tm(10, 10, 50), "t2", 20, true},
		{"none floods: every tenant is well-behaved", tm(10, 15, 12), "", 30, true},
		{"one tenant: no fairness question", tm(10), "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &results.Run{Metrics: results.Metrics{Completed: 1, Tenants: tc.tenants}}
			if got := flooder(&r.Metrics); got != tc.flood {
				t.Errorf("flooder = %q, want %q", got, tc.flood)
			}
			got, ok := wellBehaved(r, func(d results.Dist) float64 { return d.P99 })
			if ok != tc.wellknown || got != tc.wellP99 {
				t.Errorf("well-behaved p99 = %v, %v; want %v, %v", got, ok, tc.wellP99, tc.wellknown)
			}
		})
	}
}

func TestLatencyIntervalsStayAboveZero(t *testing.T) {
	// One replication in five tipped into overload: an arithmetic interval reaches below zero.
	runs := repRuns([]repSpec{{"a", []float64{6, 6.2, 5.9, 300, 6.1}, false}, {"b", []float64{7, 7.1, 6.8, 7.2, 6.9}, false}}, 100)
	c := planRuns(runs)[0].levels[0].cells[0]
	iv, _ := c.interval(metric("ttft_ms_p99"))
	if iv.Lo <= 0 || iv.Lo > iv.Mean || iv.Hi < iv.Mean {
		t.Errorf("p99 TTFT interval %+v: want 0 < lo ≤ mean ≤ hi", iv)
	}
}

func TestLogTicksLabelAtLeastTwo(t *testing.T) {
	for _, r := range [][2]float64{{200, 560}, {1, 1e5}, {310, 340}, {0.5, 0.9}, {9, 4000}} {
		ticks := logTicks{}.Ticks(r[0], r[1])
		var labels []string
		for _, tk := range ticks {
			if tk.Label != "" {
				if tk.Value < r[0] || tk.Value > r[1] || math.IsNaN(tk.Value) {
					t.Errorf("range %v: label %q at %v outside it", r, tk.Label, tk.Value)
				}
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 2 {
			t.Errorf("range %v: labels %v, want at least two", r, labels)
		}
	}
}

func TestPanelTitleFits(t *testing.T) {
	tests := []struct{ name, want string }{
		{"kv-router", "kv-router — Jain 0.550"},
		{"prefix-score,auto_tune=false,kv_cache_weight=1,prefix_weight=1,queue_weight=1",
			"prefix-score,auto_tune=false,\nkv_cache_weight=1,prefix_weight=1,\nqueue_weight=1\nJain 0.550"},
	}
	for _, tc := range tests {
		got := panelTitle(tc.name, "Jain 0.550")
		if got != tc.want {
			t.Errorf("panelTitle(%q) = %q, want %q", tc.name, got, tc.want)
		}
		for _, l := range strings.Split(got, "\n") {
			if len(l) > titleWidth {
				t.Errorf("line %q longer than %d", l, titleWidth)
			}
		}
	}
}
