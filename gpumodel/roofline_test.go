package gpumodel

import (
	"math"
	"testing"
)

// TestRooflineExact checks the Newton-step roofline against math.Pow over the whole range
// of ratios, and that it never falls below max(c, m).
func TestRooflineExact(t *testing.T) {
	for i := 0; i <= 1000; i++ {
		r := float64(i) / 1000
		for _, h := range []float64{1e-6, 0.02, 3} {
			c, m := h*r, h
			got := roofline(c, m)
			want := math.Pow(math.Pow(c, 1.5)+math.Pow(m, 1.5), 1/1.5)
			if math.Abs(got/want-1) > 1e-12 {
				t.Fatalf("roofline(%g, %g) = %.17g, want %.17g", c, m, got, want)
			}
			if got < max(c, m) || roofline(m, c) != got {
				t.Fatalf("roofline(%g, %g) = %g: below the larger term or not symmetric", c, m, got)
			}
		}
	}
	if roofline(0, 0) != 0 || roofline(0, 2) != 2 {
		t.Error("roofline with a zero term is not the other term")
	}
}
