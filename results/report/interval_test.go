package report

import (
	"testing"

	"kvroute/results"
)

// TestIntervalStaysInTheMetricsDomain: one replication of five tipping into overload makes the
// t-interval of a count's mean reach below zero and a fraction's above one; the report cuts
// them to the values the mean can take.
func TestIntervalStaysInTheMetricsDomain(t *testing.T) {
	tests := []struct {
		key    string
		set    func(*results.Metrics, float64)
		values []float64
		lo, hi float64 // the bounds the interval must respect
	}{
		{"preemptions", func(m *results.Metrics, v float64) { m.Preemptions = int(v) }, []float64{0, 0, 0, 0, 28}, 0, 1e9},
		{"hit_rate", func(m *results.Metrics, v float64) { m.HitRate = v }, []float64{1, 1, 1, 1, 0.7}, 0, 1},
		{"jain_fairness", func(m *results.Metrics, v float64) { m.JainFairness = v }, []float64{1, 1, 1, 1, 0.5}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			c := &cell{}
			for i, v := range tc.values {
				r := &results.Run{Replication: i + 1}
				r.Metrics.Completed = 1
				tc.set(&r.Metrics, v)
				c.runs = append(c.runs, r)
			}
			iv, ok := c.interval(metric(tc.key))
			if !ok {
				t.Fatal("no interval")
			}
			if iv.Lo < tc.lo || iv.Hi > tc.hi || iv.Lo > iv.Mean || iv.Mean > iv.Hi {
				t.Errorf("interval %+v leaves [%v, %v] or misses its mean", iv, tc.lo, tc.hi)
			}
			if iv.Lo == iv.Hi {
				t.Errorf("interval %+v collapsed", iv)
			}
		})
	}
}
