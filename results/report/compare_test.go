package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/results"

	"kvroute/results/resultstest"
)

// TestCompareErrors compares the two synthetic directories under testdata/compare.
func TestCompareErrors(t *testing.T) {
	sim, err := results.ReadSummary(filepath.Join("testdata", "compare", "sim"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := results.ReadSummary(filepath.Join("testdata", "compare", "live"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(sim, live, DefaultCompareConfig())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Metric string
		Err    float64
		Within bool
	}
	want := map[string][]row{
		"prefix-score/rate=10": {
			{"ttft_ms.mean", 0.25, false}, {"ttft_ms.p50", -0.1, true}, {"ttft_ms.p90", 0, true}, {"ttft_ms.p99", 0.25, true},
			{"tpot_ms.mean", 0, true}, {"tpot_ms.p50", 0, true}, {"tpot_ms.p90", 0, true}, {"tpot_ms.p99", 0, true},
			{"e2e_ms.mean", 0, true}, {"e2e_ms.p50", 0, true}, {"e2e_ms.p90", 0, true}, {"e2e_ms.p99", 0, true},
			{"hit_rate", 0.02, true}, {"server_hit_rate", 0.1, false},
		},
		"prefix-score/rate=20": {
			{"ttft_ms.mean", 0, true}, {"ttft_ms.p50", 0, true}, {"ttft_ms.p90", 0, true}, {"ttft_ms.p99", 0, true},
			{"tpot_ms.mean", -0.2, false}, {"tpot_ms.p50", 0, true}, {"tpot_ms.p90", 0, true}, {"tpot_ms.p99", 0, true},
			{"e2e_ms.mean", 0, true}, {"e2e_ms.p50", 0, true}, {"e2e_ms.p90", 0, true}, {"e2e_ms.p99", math.NaN(), false},
			{"hit_rate", 0, true},
		},
	}
	got := map[string][]row{}
	for _, p := range c.Pairs {
		for _, e := range p.Errors {
			got[p.Sim.Name] = append(got[p.Sim.Name], row{e.Metric, e.Err, e.Within})
		}
	}
	approx := cmp.Comparer(func(a, b float64) bool {
		return (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) <= 1e-9
	})
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	matched := map[string]string{}
	for _, p := range c.Pairs {
		matched[p.Sim.Name] = p.Live.Name + " by " + p.MatchedBy
	}
	wantMatch := map[string]string{"prefix-score/rate=10": "prefix-score/rate=10 by name", "prefix-score/rate=20": "mine/rate=20 by policy+load"}
	if diff := cmp.Diff(wantMatch, matched); diff != "" {
		t.Errorf("matches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"random/rate=10"}, c.UnmatchedSim); diff != "" {
		t.Errorf("unmatched sim (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"other/rate=30"}, c.UnmatchedLive); diff != "" {
		t.Errorf("unmatched live (-want +got):\n%s", diff)
	}
}

func TestCompareMatching(t *testing.T) {
	run := func(name, policy string, rate float64) results.Run {
		return results.Run{Name: name, Policy: policy, RequestRate: rate}
	}
	cases := []struct {
		name      string
		sim, live []results.Run
		want      []string // "sim=live by how"
		wantErr   bool
	}{
		{"by name", []results.Run{run("a/rate=1", "a", 1)}, []results.Run{run("a/rate=1", "x", 5)}, []string{"a/rate=1=a/rate=1 by name"}, false},
		{"by policy and load", []results.Run{run("a/rate=1", "a", 1), run("a/rate=2", "a", 2)},
			[]results.Run{run("l/rate=2", "a", 2), run("l/rate=1", "a", 1)},
			[]string{"a/rate=1=l/rate=1 by policy+load", "a/rate=2=l/rate=2 by policy+load"}, false},
		{"by load alone", []results.Run{run("a", "a", 3)}, []results.Run{run("live", "live", 3.0001)}, []string{"a=live by load"}, false},
		{"ambiguous load", []results.Run{run("a", "a", 3), run("b", "b", 3)}, []results.Run{run("live", "live", 3)}, nil, true},
		{"nothing in common", []results.Run{run("a", "a", 3)}, []results.Run{run("live", "live", 4)}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compare(tc.sim, tc.live, DefaultCompareConfig())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v; want error %v", err, tc.wantErr)
			}
			var got []string
			for _, p := range c.Pairs {
				got = append(got, p.Sim.Name+"="+p.Live.Name+" by "+p.MatchedBy)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pairs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareWriteDir(t *testing.T) {
	runs, _ := resultstest.Runs()
	sim := runs[:2]
	live := make([]results.Run, len(sim))
	for i, r := range sim {
		live[i] = r
		live[i].Metrics.TTFT.P99 *= 1.5
		live[i].Scenario = map[string]any{"server_hit_rate": r.Metrics.HitRate}
	}
	c, err := Compare(sim, live, DefaultCompareConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := c.WriteDir(dir, "sim", "live"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, CompareFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Verdict", "out of tolerance", "ttft_ms.p99", "-33.3%", "server_hit_rate", "Tolerances: TTFT 20/20/25/30%"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("compare.md lacks %q", want)
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	for _, p := range pngs {
		if !strings.Contains(string(md), "("+filepath.Base(p)+")") {
			t.Errorf("%s is not linked from compare.md", filepath.Base(p))
		}
	}
	if len(pngs) == 0 {
		t.Error("no plot written")
	}
	var tbl bytes.Buffer
	if err := c.WriteTable(&tbl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "within tolerance") && !strings.Contains(tbl.String(), "out of tolerance") {
		t.Errorf("table has no verdict:\n%s", tbl.String())
	}
}

func TestCompareConfigValidate(t *testing.T) {
	c := DefaultCompareConfig()
	c.TTFT[3], c.HitRate = -1, math.NaN()
	if err := c.Validate(); err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("got %v; want two problems", err)
	}
	if err := DefaultCompareConfig().Validate(); err != nil {
		t.Error(err)
	}
}
