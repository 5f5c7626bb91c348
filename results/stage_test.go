package results

import (
	"math"
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
