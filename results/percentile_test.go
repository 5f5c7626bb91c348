package results

import (
	"math"
	"testing"
)

// TestPercentile checks numpy.percentile's default (linear) method: rank p/100·(n−1), then
// interpolate between its neighbours.
func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, 0},
		{"one value", []float64{7}, 99, 7},
		{"median of an even count", []float64{1, 2, 3, 4}, 50, 2.5},
		{"p99 interpolates", []float64{1, 2, 3, 4}, 99, 3.97},
		{"p90 of five", []float64{10, 20, 30, 40, 50}, 90, 46},
		{"p0 is the minimum", []float64{3, 5, 9}, 0, 3},
		{"p100 is the maximum", []float64{3, 5, 9}, 100, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
			}
		})
	}
}
