package results

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantilesWithinHalfPercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []time.Duration
	for range 20000 {
		d := time.Duration(rng.ExpFloat64() * float64(50*time.Millisecond))
		vals = append(vals, d)
		h.Add(d, 1)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.006 {
			t.Errorf("q%.2f = %v, exact %v (%.2f%% off)", q, got, want, 100*rel)
		}
	}
	var sum time.Duration
	for _, v := range vals {
		sum += v
	}
	if mean := sum / time.Duration(len(vals)); absDur(h.Mean()-mean) > time.Microsecond {
		t.Errorf("mean %v, exact %v", h.Mean(), mean)
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

func TestJain(t *testing.T) {
	cases := []struct {
		x    map[string]float64
		want float64
	}{
		{map[string]float64{}, 1},
		{map[string]float64{"a": 5, "b": 5}, 1},
		{map[string]float64{"a": 1, "b": 0, "c": 0, "d": 0}, 0.25},
		{map[string]float64{"a": 3, "b": 1}, 16.0 / 20},
	}
	for _, tc := range cases {
		if got := Jain(tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
}

func TestAggregator(t *testing.T) {
	a := NewAggregator()
	ms := time.Millisecond
	a.Add(&Record{ID: "1", Tenant: "x", PrefixGroup: "g", Endpoint: "e1", Status: StatusCompleted, Arrival: 0, FirstToken: 100 * ms, Finish: 1100 * ms, PromptTokens: 100, CachedTokens: 64, OutputTokens: 11})
	a.Add(&Record{ID: "2", Tenant: "y", PrefixGroup: "g", Endpoint: "e2", Status: StatusCompleted, Arrival: 1000 * ms, FirstToken: 1300 * ms, Finish: 2000 * ms, PromptTokens: 100, CachedTokens: 0, OutputTokens: 8})
	a.Add(&Record{ID: "3", Tenant: "x", Status: StatusFailed, Arrival: 500 * ms, Finish: 600 * ms})
	m := a.Metrics()
	if m.Requests != 3 || m.Completed != 2 || m.Failed != 1 || m.DurationS != 2 || m.ThroughputRPS != 1 {
		t.Fatalf("counts: %+v", m)
	}
	if m.HitRate != 0.32 || m.OutputTokensPerS != 9.5 || m.PrefixSplitRate != 0.5 {
		t.Fatalf("hit rate %v, output tok/s %v, split %v", m.HitRate, m.OutputTokensPerS, m.PrefixSplitRate)
	}
	if math.Abs(m.TTFT.Mean-200) > 0.01 || math.Abs(m.TPOT.Mean-100) > 0.01 {
		t.Fatalf("ttft %+v tpot %+v", m.TTFT, m.TPOT)
	}
}
