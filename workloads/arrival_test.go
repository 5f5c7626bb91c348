package workloads

import (
	"math"
	"testing"
	"time"
)

// gaps returns n inter-arrival times (seconds) of a resolved process.
func gaps(a ArrivalConfig, n, normalizeN int) []float64 {
	arr := newArrivals(a, newRand(1, tagArrival), normalizeN)
	out := make([]float64, n)
	prev := time.Duration(0)
	for i := range out {
		t, _ := arr.next()
		out[i] = (t - prev).Seconds()
		prev = t
	}
	return out
}

func meanVar(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

func TestArrivalStatistics(t *testing.T) {
	tests := []struct {
		name   string
		a      ArrivalConfig
		wantCV float64 // squared coefficient of variation of the gaps: 1/burstiness
	}{
		{name: "poisson", a: ArrivalConfig{Process: ProcessPoisson, Rate: 10}, wantCV: 1},
		{name: "gamma-bursty", a: ArrivalConfig{Process: ProcessGamma, Rate: 25, Burstiness: 0.25}, wantCV: 4},
		{name: "gamma-smooth", a: ArrivalConfig{Process: ProcessGamma, Rate: 4, Burstiness: 4}, wantCV: 0.25},
		{name: "gamma-one-is-poisson", a: ArrivalConfig{Process: ProcessGamma, Rate: 10, Burstiness: 1}, wantCV: 1},
		{name: "constant", a: ArrivalConfig{Process: ProcessConstant, Rate: 8}, wantCV: 0},
	}
	const n = 40_000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mean, variance := meanVar(gaps(tc.a, n, 0))
			if got, want := 1/mean, tc.a.Rate; math.Abs(got-want)/want > 0.03 {
				t.Errorf("rate = %.3f/s, want %.3f/s ±3%%", got, want)
			}
			cv := variance / (mean * mean)
			if math.Abs(cv-tc.wantCV) > 0.08*math.Max(tc.wantCV, 0.1) {
				t.Errorf("squared CV = %.3f, want %.3f", cv, tc.wantCV)
			}
		})
	}
}

func TestArrivalNormalize(t *testing.T) {
	a := ArrivalConfig{Process: ProcessGamma, Rate: 5, Burstiness: 0.5, Normalize: true}
	arr := newArrivals(a, newRand(3, tagArrival), 100)
	var last time.Duration
	for range 100 {
		last, _ = arr.next()
	}
	if want := 20 * time.Second; (last - want).Abs() > time.Microsecond {
		t.Errorf("100th arrival at %v, want %v (N/rate)", last, want)
	}
	if next, _ := arr.next(); next < last {
		t.Errorf("arrival after the normalized ones goes back: %v < %v", next, last)
	}
}

func TestArrivalImmediate(t *testing.T) {
	arr := newArrivals(ArrivalConfig{Process: ProcessImmediate}, newRand(1), 0)
	for range 10 {
		if got, _ := arr.next(); got != 0 {
			t.Fatalf("immediate arrival at %v, want 0", got)
		}
	}
}

func TestGeometricMean(t *testing.T) {
	r := newRand(9)
	for _, mean := range []float64{1, 1.5, 3.51, 10} {
		sum := 0
		const n = 50_000
		for range n {
			sum += sampleGeometric(r, mean)
		}
		if got := float64(sum) / n; math.Abs(got-mean)/mean > 0.03 {
			t.Errorf("geometric mean = %.3f, want %.3f", got, mean)
		}
	}
}
