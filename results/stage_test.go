package results

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// stageRecord is a completed request arriving at arr seconds with the given TTFT and E2E.
func stageRecord(id string, arr, ttft, e2e float64, out int) *Record {
	s := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	return &Record{ID: id, Status: StatusCompleted, Arrival: s(arr), FirstToken: s(arr + ttft), Finish: s(arr + e2e),
		PromptTokens: 100, CachedTokens: 50, OutputTokens: out}
}

func TestStageCollector(t *testing.T) {
	c := NewStageCollector(SLO{})
	c.Add(0, stageRecord("a", 0, 1, 2, 10))
	c.Add(0, stageRecord("b", 1, 1, 3, 30)) // stage 0: 40 tokens over 0 → 4 s
	c.Add(2, stageRecord("c", 10, 2, 6, 60))
	c.Add(-1, stageRecord("ignored", 5, 1, 1, 1))
	tests := []struct {
		stage                int
		wantN                int
		wantOutTokS, wantDur float64
	}{
		{0, 2, 10, 4},
		{1, 0, 0, 0},
		{2, 1, 10, 6},
		{7, 0, 0, 0},
	}
	for _, tc := range tests {
		m := c.Metrics(tc.stage)
		if m.Requests != tc.wantN || math.Abs(m.OutputTokensPerS-tc.wantOutTokS) > 1e-9 || math.Abs(m.DurationS-tc.wantDur) > 1e-9 {
			t.Errorf("stage %d: %d requests, %.3f out tok/s over %.3f s; want %d, %.3f, %.3f",
				tc.stage, m.Requests, m.OutputTokensPerS, m.DurationS, tc.wantN, tc.wantOutTokS, tc.wantDur)
		}
	}
}

func TestMeanOverStages(t *testing.T) {
	stage := func(warm bool, completed int, p90, outTokS float64) Stage {
		return Stage{Warmup: warm, Metrics: Metrics{Completed: completed, TTFT: Dist{P90: p90, Mean: p90 / 2}, OutputTokensPerS: outTokS, HitRate: 0.5}}
	}
	tests := []struct {
		name   string
		stages []Stage
		want   *StageMean
	}{
		{"none", nil, nil},
		{"only warm-up", []Stage{stage(true, 5, 100, 1)}, nil},
		{"warm-up and empty stages left out", []Stage{stage(true, 5, 1e6, 1e6), stage(false, 3, 100, 10), stage(false, 0, 0, 0), stage(false, 1, 300, 30)},
			&StageMean{Stages: 2, TTFT: Dist{P90: 200, Mean: 100}, OutputTokensPerS: 20, HitRate: 0.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MeanOverStages(tc.stages)
			if d := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); d != "" {
				t.Errorf("MeanOverStages (-want +got):\n%s", d)
			}
		})
	}
}

// TestStagesInResults checks that per-stage results reach summary.json (and read back), the
// report and the terminal table, and that runs without stages write neither.
func TestStagesInResults(t *testing.T) {
	runs, _ := fixtureRuns()
	runs[0].Stages = []Stage{{Index: 0, Rate: 15, Warmup: true, Metrics: Metrics{Completed: 1, TTFT: Dist{P90: 600}}},
		{Index: 1, Rate: 3, StartS: 70, Metrics: Metrics{Completed: 2, TTFT: Dist{P90: 1500, Mean: 700}, OutputTokensPerS: 123}}}
	runs[0].StageMean = MeanOverStages(runs[0].Stages)
	dir := t.TempDir()
	if err := WriteDir(dir, runs, nil); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(runs[0].Stages, back[0].Stages); d != "" || back[0].StageMean == nil || back[1].Stages != nil {
		t.Errorf("stages do not round-trip (-want +got):\n%s (mean %v, run 1 %v)", d, back[0].StageMean, back[1].Stages)
	}
	report, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Stages", "| 15@0 (warm-up) | 3@1 |", "| 1 | 1.500 | 0.700 | 123.0 |"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var tbl bytes.Buffer
	if err := WriteStageTable(&tbl, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "15@0 (warm-up)") || !strings.Contains(tbl.String(), "1.50") {
		t.Errorf("stage table:\n%s", tbl.String())
	}
	tbl.Reset()
	if err := WriteStageTable(&tbl, runs[1:]); err != nil || tbl.Len() != 0 {
		t.Errorf("stage table without stages: %q, %v", tbl.String(), err)
	}
}
