package results

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestCollectorMetricDefinitions(t *testing.T) {
	// Two completed requests and one failure; the expected values follow vllm bench serve.
	recs := []Record{
		{ID: "a", Tenant: "x", Status: StatusCompleted, Arrival: 0, FirstToken: 100 * ms, Finish: 1100 * ms, PromptTokens: 100, CachedTokens: 50, OutputTokens: 11},
		{ID: "b", Tenant: "y", Status: StatusCompleted, Arrival: 1000 * ms, FirstToken: 1400 * ms, Finish: 3000 * ms, PromptTokens: 300, CachedTokens: 0, OutputTokens: 5},
		{ID: "c", Tenant: "x", Status: StatusFailed, Arrival: 2000 * ms, Finish: 2500 * ms},
	}
	cases := []struct {
		name    string
		steps   []time.Duration // AddITL gaps, one token each; none: ITL falls back to TPOT
		wantITL Dist
	}{
		{"itl from tpot", nil, Dist{Mean: 2600.0 / 14, P50: 100, P90: 400, P99: 400}}, // 10 gaps of 100 ms, 4 of 400
		{"itl from steps", []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms}, Dist{Mean: 25, P50: 20, P90: 40, P99: 40}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCollector(CollectorOpts{Name: "r", Policy: "p"})
			for _, d := range tc.steps {
				c.AddITL(d, 1)
			}
			for i := range recs {
				c.Add(&recs[i])
			}
			m := c.Run().Metrics
			checks := []struct {
				name      string
				got, want float64
			}{
				{"requests", float64(m.Requests), 3}, {"completed", float64(m.Completed), 2}, {"failed", float64(m.Failed), 1},
				{"duration_s (last finish − first arrival)", m.DurationS, 3},
				{"throughput_rps", m.ThroughputRPS, 2.0 / 3}, {"output_tokens_per_s", m.OutputTokensPerS, 16.0 / 3},
				{"ttft mean (first token − arrival)", m.TTFT.Mean, 250}, {"ttft p99", m.TTFT.P99, 400},
				{"tpot mean ((e2e − ttft)/(out − 1))", m.TPOT.Mean, 250}, {"tpot p50", m.TPOT.P50, 100},
				{"e2e mean (finish − arrival)", m.E2E.Mean, 1550}, {"e2e p99", m.E2E.P99, 2000},
				{"hit_rate (token-weighted)", m.HitRate, 50.0 / 400},
				{"arrival_window_s (last arrival − first arrival)", m.ArrivalWindowS, 2},
				{"window_throughput_rps (completed by the last arrival / window)", m.WindowThroughputRPS, 1.0 / 2},
				{"tenant x requests", float64(m.Tenants["x"].Requests), 2}, {"tenant x completed", float64(m.Tenants["x"].Completed), 1},
				{"tenant y service (prompt + 2 × output)", m.Tenants["y"].Service, 310}, {"tenant y ttft p50", m.Tenants["y"].TTFT.P50, 400},
				{"itl mean", m.ITL.Mean, tc.wantITL.Mean}, {"itl p50", m.ITL.P50, tc.wantITL.P50}, {"itl p99", m.ITL.P99, tc.wantITL.P99},
			}
			for _, ck := range checks {
				if !near(ck.got, ck.want, 0.006) {
					t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
				}
			}
			if f, ok := m.HeaviestTenant(); !ok || f != "x" {
				t.Errorf("HeaviestTenant() = %q, %v; want x (most requests)", f, ok)
			}
		})
	}
}

func TestCollectorRateAndWindow(t *testing.T) {
	cases := []struct {
		name         string
		rate         float64
		arrivals     []time.Duration // each request finishes 1 s after it arrives
		wantRate     float64
		wantMeasured bool
		wantWindow   float64
		wantWindowR  float64
		wantTokS     float64 // 100 output tokens each, spread from first token to finish
	}{
		// Tokens of request k spread over [k s + 1 ms, k+1 s]: by 2 s, two requests' tokens.
		{"configured rate", 5, []time.Duration{0, time.Second, 2 * time.Second}, 5, false, 2, 2.0 / 2, 200 / 2},
		{"measured rate", 0, []time.Duration{0, time.Second, 2 * time.Second}, 1, true, 2, 2.0 / 2, 200 / 2},
		{"all at once: the run's duration", 0, []time.Duration{0, 0}, 0, true, 1, 2, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCollector(CollectorOpts{Name: "r", RequestRate: tc.rate})
			for i, a := range tc.arrivals {
				c.Add(&Record{ID: fmt.Sprint(i), Status: StatusCompleted, Arrival: a, FirstToken: a + ms, Finish: a + time.Second, OutputTokens: 100})
			}
			r := c.Run()
			if !near(r.RequestRate, tc.wantRate, 1e-9) || r.RateMeasured != tc.wantMeasured {
				t.Errorf("rate %v measured %v, want %v %v", r.RequestRate, r.RateMeasured, tc.wantRate, tc.wantMeasured)
			}
			if m := r.Metrics; !near(m.ArrivalWindowS, tc.wantWindow, 1e-9) || !near(m.WindowThroughputRPS, tc.wantWindowR, 1e-9) {
				t.Errorf("window %v s, %v req/s; want %v s, %v req/s", m.ArrivalWindowS, m.WindowThroughputRPS, tc.wantWindow, tc.wantWindowR)
			}
			if m := r.Metrics; !near(m.WindowOutputTokensPerS, tc.wantTokS, 0.01) {
				t.Errorf("window output %v tok/s, want %v", m.WindowOutputTokensPerS, tc.wantTokS)
			}
		})
	}
}

// near reports whether got is within a relative tolerance tol of want.
func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), 1e-9)
}

func TestCollectorRequestRate(t *testing.T) {
	cases := []struct {
		name     string
		offered  float64
		arrivals []time.Duration
		want     float64
	}{
		{"measured", 0, []time.Duration{0, 500 * ms, 1000 * ms, 1500 * ms}, 2},
		{"offered wins", 7, []time.Duration{0, 500 * ms}, 7},
		{"one arrival", 0, []time.Duration{time.Second}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCollector(CollectorOpts{RequestRate: tc.offered})
			for _, a := range tc.arrivals {
				c.Add(&Record{Status: StatusCompleted, Arrival: a, FirstToken: a + ms, Finish: a + 2*ms, OutputTokens: 100})
			}
			if got := c.Run().RequestRate; !near(got, tc.want, 1e-12) {
				t.Errorf("RequestRate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCollectorSpreadsOutputOverDecoding(t *testing.T) {
	c := NewCollector(CollectorOpts{})
	// Ten output tokens decoded from 0.5 s to 3.5 s: by the ends of the 1 s buckets,
	// ⌊10·(t−0.5)/3⌋ = 1, 5, 8 and then all 10 are done.
	c.Add(&Record{Tenant: "a", Status: StatusCompleted, Arrival: 0, FirstToken: 500 * ms, Finish: 3500 * ms, PromptTokens: 7, OutputTokens: 10})
	s := c.Run().Series
	if got, want := s.PromptTokens["a"], []int64{7, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("prompt tokens %v, want %v", got, want)
	}
	if got, want := s.OutputTokens["a"], []int64{1, 4, 3, 2}; !slices.Equal(got, want) {
		t.Errorf("output tokens %v, want %v", got, want)
	}
}

func TestHistogramCDF(t *testing.T) {
	var h Histogram
	if h.CDF() != nil {
		t.Fatal("empty histogram has a CDF")
	}
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i)*ms, 1)
	}
	cdf := h.CDF()
	if n := len(cdf); n < 50 || n > 600 {
		t.Errorf("%d points, want a few hundred at most", n)
	}
	last := cdf[len(cdf)-1]
	if last.Frac != 1 || last.Ms != 1000 {
		t.Errorf("last point %+v, want {1000 1}", last)
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Ms < cdf[i-1].Ms || cdf[i].Frac <= cdf[i-1].Frac {
			t.Fatalf("not increasing at %d: %+v then %+v", i, cdf[i-1], cdf[i])
		}
	}
	for _, p := range cdf { // the fraction at x is within one bucket (1%) of x/1000
		if want := p.Ms / 1000; math.Abs(p.Frac-want) > 0.011*want+0.002 {
			t.Errorf("F(%v ms) = %v, want about %v", p.Ms, p.Frac, want)
		}
	}
}
