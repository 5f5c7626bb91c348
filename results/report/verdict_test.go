package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kvroute/results"
)

// repSpec is one policy of a replicated fixture: its p99 TTFT at each replication.
type repSpec struct {
	policy string
	p99    []float64
	skew   bool // sends most requests to one of 4 replicas
}

// repRuns builds the runs of a replicated sweep: every spec at each rate, replication k
// (1-based) with p99[k-1] scaled by the rate.
func repRuns(specs []repSpec, rates ...float64) []results.Run {
	var runs []results.Run
	for _, rate := range rates {
		for _, s := range specs {
			for k, v := range s.p99 {
				ep := map[string]int{"e0": 25, "e1": 25, "e2": 25, "e3": 25}
				if s.skew {
					ep = map[string]int{"e0": 85, "e1": 15}
				}
				runs = append(runs, results.Run{
					Name: results.RepName(fmt.Sprintf("%s/rate=%g", s.policy, rate), k+1), Policy: s.policy, Group: "chat",
					RequestRate: rate, Replication: k + 1,
					Scenario: map[string]any{"fleet": map[string]any{"replicas": 4}},
					Metrics: results.Metrics{Requests: 100, Completed: 100, ThroughputRPS: rate, HitRate: 0.5,
						TTFT: results.Dist{P50: v / 3 * rate, P99: v * rate}, Endpoints: ep},
				})
			}
		}
	}
	return runs
}

func TestAnswerNamesWinnerOnlyWhenSignificant(t *testing.T) {
	fast := []float64{100, 120, 90, 110, 105}
	tests := []struct {
		name   string
		specs  []repSpec
		want   []string
		reject []string
	}{
		{"winner", []repSpec{{"a", fast, false}, {"b", scale(fast, 1.3, 0.02), false}, {"c", scale(fast, 3, 0.05), false}},
			[]string{"**Use a**", "Significantly slower, by less than 2×: b 1.29× [1.27, 1.32]", "**Avoid**", "**c**: p99 TTFT 2.97× [2.82, 3.13]"},
			[]string{"tied"}},
		{"tie", []repSpec{{"a", fast, false}, {"b", []float64{104, 112, 98, 103, 109}, false}, {"c", scale(fast, 2.5, 0.05), true}},
			// Latencies are geometric means over replications.
			[]string{"**No single winner: 2 policies are tied**", "a 1,045 ms [", "b 1,051 ms [", "**c**: p99 TTFT 2.47×",
				"| c | imbalance | 5/5 | 1 | sent 85 of 100 requests to one replica (a fair share is 25) and used 2 of 4 |"},
			[]string{"**Use"}},
		{"one-replication", []repSpec{{"a", fast[:1], false}, {"b", scale(fast, 3, 0)[:1], false}},
			[]string{"One replication cannot tell a difference from noise"}, []string{"**Use", "**Avoid**", "tied"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeAnswer(&b, planRuns(repRuns(tc.specs, 10)))
			writeFlags(&b, planRuns(repRuns(tc.specs, 10)))
			got := b.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("answer lacks %q:\n%s", w, got)
				}
			}
			for _, r := range tc.reject {
				if strings.Contains(got, r) {
					t.Errorf("answer holds %q:\n%s", r, got)
				}
			}
		})
	}
}

// scale multiplies xs by f, with a relative wobble of ±w alternating by index.
func scale(xs []float64, f, w float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f * (1 + w*float64(i%3-1))
	}
	return out
}

// reportImage matches an image reference in report.md.
var reportImage = regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`)

// TestReportStructure writes a replicated sweep and checks what a reader relies on: the
// sections in order, intervals in the policies table and the machine-readable files, every
// referenced image present, and report.html self-contained.
func TestReportStructure(t *testing.T) {
	specs := []repSpec{{"a", []float64{100, 120, 90, 110, 105}, false}, {"b", []float64{300, 330, 280, 310, 290}, true}}
	runs := repRuns(specs, 5, 10)
	dir := t.TempDir()
	if err := WriteDir(dir, runs, nil); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	report := read(results.ReportFile)
	last := -1
	for _, s := range []string{SectionAnswer, SectionWarnings, SectionVerdict, SectionPlots, SectionPolicies, SectionRuns, SectionScenarios, SectionMethod} {
		i := strings.Index(report, "\n"+s+"\n")
		if i <= last {
			t.Errorf("section %q missing or out of order (at %d, previous at %d)", s, i, last)
		}
		last = i
	}
	policies := report[strings.Index(report, SectionPolicies):strings.Index(report, SectionRuns)]
	if n := len(regexp.MustCompile(`\d( ms| req/s)? \[[-\d.,]+, [-\d.,]+( ms| req/s)?\]`).FindAllString(policies, -1)); n < 4*6 {
		t.Errorf("policies table has %d intervals, want at least 24 (4 rows of 6 metrics):\n%s", n, policies)
	}
	if strings.Contains(policies, "Jain's index") {
		t.Errorf("policies table of a one-tenant sweep has a Jain's index column:\n%s", policies)
	}
	imgs := reportImage.FindAllStringSubmatch(report, -1)
	if len(imgs) == 0 {
		t.Fatal("report.md references no image")
	}
	for _, m := range imgs {
		if !strings.HasPrefix(m[1], PlotDir+"/") {
			t.Errorf("image %s is not under %s/", m[1], PlotDir)
		}
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
			t.Errorf("report.md references %s: %v", m[1], err)
		}
	}
	page := read(HTMLReportFile)
	if strings.Contains(page, `src="`+PlotDir) || strings.Count(page, `src="data:image/png;base64,`) != len(imgs) {
		t.Errorf("report.html embeds %d of %d images as data URIs", strings.Count(page, "data:image/png"), len(imgs))
	}
	for _, s := range []string{"<h2>Answer</h2>", "<table>", "<strong>Use a</strong>"} {
		if !strings.Contains(page, s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
	var sum struct {
		Policies []PolicySummary `json:"policies"`
	}
	if err := json.Unmarshal([]byte(read(results.SummaryJSONFile)), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Policies) != 4 || sum.Policies[0].Metrics["ttft_ms_p99"].N != 5 || !(sum.Policies[0].Metrics["ttft_ms_p99"].Lo < sum.Policies[0].Metrics["ttft_ms_p99"].Hi) {
		t.Errorf("summary.json policies: %+v", sum.Policies)
	}
	rows, err := csv.NewReader(strings.NewReader(read(results.SummaryCSVFile))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := slices.Index(rows[0], "ttft_ms_p99_ci_lo"), slices.Index(rows[0], "ttft_ms_p99_ci_hi")
	if lo < 0 || hi < 0 || rows[1][lo] == "" || rows[1][lo] == rows[1][hi] {
		t.Errorf("summary.csv lacks the p99 TTFT interval: %v / %v", rows[0], rows[1])
	}
	again := t.TempDir()
	if err := WriteDir(again, runs, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{results.ReportFile, HTMLReportFile, results.SummaryJSONFile, results.SummaryCSVFile, imgs[0][1]} {
		x, _ := os.ReadFile(filepath.Join(dir, name))
		y, _ := os.ReadFile(filepath.Join(again, name))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes of the same runs", name)
		}
	}
}
