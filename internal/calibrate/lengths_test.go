package calibrate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestUnclampedMean checks the closed-form inversion by sampling: log-normal draws with the
// returned mean, clamped at c, average the target within 1%.
func TestUnclampedMean(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ target, sigma, clamp float64 }{
		{230, 1.0, 1024}, {194, 0.8, 1024}, {600, 1.0, 1024}, {50, 1.0, 4096},
	} {
		mean := float64(unclampedMean(c.target, c.sigma, c.clamp))
		if mean < c.target {
			t.Errorf("%+v: unclamped mean %.0f below the clamped target", c, mean)
		}
		mu := math.Log(mean) - c.sigma*c.sigma/2
		const n = 400000
		var sum float64
		for range n {
			sum += math.Min(math.Exp(mu+c.sigma*r.NormFloat64()), c.clamp)
		}
		if got := sum / n; math.Abs(got/c.target-1) > 0.01 {
			t.Errorf("%+v: clamped draws with mean %.0f average %.1f, want %.0f ±1%%", c, mean, got, c.target)
		}
	}
	if got := unclampedMean(2000, 1, 1024); got != 1024 {
		t.Errorf("target above the clamp: %d, want the clamp 1024", got)
	}
}
