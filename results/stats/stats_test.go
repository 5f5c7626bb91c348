package stats

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// Student's sleep data (Student 1908, "The probable error of a mean", Biometrika 6(1),
// table II; R's datasets::sleep): extra hours of sleep of ten patients under two drugs.
// R's t.test(extra ~ group, data = sleep, paired = TRUE) reports mean difference −1.58,
// t = −4.0621, df = 9 and the 95% interval [−2.4598858, −0.7001142].
var (
	sleepDrug1 = []float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0}
	sleepDrug2 = []float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4}
)

func TestPairedDiffTextbook(t *testing.T) {
	got := PairedDiff(sleepDrug1, sleepDrug2)
	want := Interval{Mean: -1.58, Lo: -2.4598858, Hi: -0.7001142, N: 10}
	if !within(got.Mean, want.Mean, 1e-9) || !within(got.Lo, want.Lo, 1e-6) || !within(got.Hi, want.Hi, 1e-6) || got.N != 10 {
		t.Errorf("PairedDiff(sleep) = %+v, want %+v", got, want)
	}
	if !got.Excludes(0) {
		t.Error("the sleep difference is significant (p = 0.0028) but the interval holds 0")
	}
}

func TestMeanCI(t *testing.T) {
	tests := []struct {
		name          string
		xs            []float64
		mean, lo, hi  float64
		tested, excl0 bool
	}{
		// n = 2: t(0.975, 1) = 12.7062047; mean 2, s = √2, s/√2 = 1.
		{"two", []float64{1, 3}, 2, 2 - 12.7062047, 2 + 12.7062047, true, false},
		// Student's drug 2 alone: R's t.test(sleep$extra[11:20]) gives [0.8976775, 3.7623225].
		{"sleep-drug2", sleepDrug2, 2.33, 0.8976775, 3.7623225, true, true},
		{"constant", []float64{5, 5, 5}, 5, 5, 5, true, true},
		{"one", []float64{7}, 7, 7, 7, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MeanCI(tc.xs)
			if !within(got.Mean, tc.mean, 1e-9) || !within(got.Lo, tc.lo, 1e-6) || !within(got.Hi, tc.hi, 1e-6) {
				t.Errorf("MeanCI = %+v, want mean %v [%v, %v]", got, tc.mean, tc.lo, tc.hi)
			}
			if got.Tested() != tc.tested || got.Excludes(0) != tc.excl0 {
				t.Errorf("Tested %v Excludes(0) %v, want %v %v", got.Tested(), got.Excludes(0), tc.tested, tc.excl0)
			}
		})
	}
	if iv := MeanCI(nil); !math.IsNaN(iv.Mean) || iv.N != 0 {
		t.Errorf("MeanCI(nil) = %+v, want NaN", iv)
	}
}

func TestPairedRatio(t *testing.T) {
	// b is a exactly twice over, so the ratio is 0.5 with no spread.
	a := []float64{10, 20, 40}
	b := []float64{20, 40, 80}
	got := PairedRatio(a, b)
	if !within(got.Mean, 0.5, 1e-12) || !within(got.Lo, 0.5, 1e-12) || !within(got.Hi, 0.5, 1e-12) || !got.Excludes(1) {
		t.Errorf("PairedRatio = %+v, want 0.5 exactly", got)
	}
}

func within(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPairedTTextbook(t *testing.T) {
	// R: t.test(extra ~ group, data = sleep, paired = TRUE): p-value = 0.002833.
	iv, p := PairedT(sleepDrug1, sleepDrug2, false)
	if !within(iv.Mean, -1.58, 1e-9) || !within(p, 0.002833, 1e-6) {
		t.Errorf("PairedT(sleep) = %+v, p %v; want mean -1.58, p 0.002833", iv, p)
	}
	if _, p := PairedT([]float64{1, 2, 3}, []float64{1, 2, 3}, true); p != 1 {
		t.Errorf("identical samples: p %v, want 1", p)
	}
	if r, p := PairedT([]float64{20, 40}, []float64{10, 20}, true); p > 1e-9 || !within(r.Mean, 2, 1e-12) {
		t.Errorf("a constant ratio of 2: %+v p %v, want 2 and p ≈ 0", r, p)
	}
}

func TestHolm(t *testing.T) {
	tests := []struct {
		name string
		p    []float64
		want []bool
	}{
		// Sorted 0.005 ≤ 0.05/4, 0.01 ≤ 0.05/3, then 0.03 > 0.05/2 stops the procedure.
		{"step-down", []float64{0.01, 0.04, 0.03, 0.005}, []bool{true, false, false, true}},
		{"all", []float64{0.001, 0.002}, []bool{true, true}},
		{"first-fails", []float64{0.03, 0.001 + 0.03}, []bool{false, false}},
		{"none", nil, []bool{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Holm(tc.p, 0.05); !slices.Equal(got, tc.want) {
				t.Errorf("Holm(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestGeoMeanCI(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
	}{
		{"spread over two decades", []float64{600, 700, 650, 30000, 620}},
		{"two", []float64{1, 100}},
		{"constant", []float64{5, 5, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := GeoMeanCI(tc.xs)
			if want := stat.GeometricMean(tc.xs, nil); !within(got.Mean, want, 1e-9*want) {
				t.Errorf("mean %v, want gonum's geometric mean %v", got.Mean, want)
			}
			if got.Lo <= 0 || got.Lo > got.Mean || got.Hi < got.Mean {
				t.Errorf("interval [%v, %v] around %v: want 0 < lo ≤ mean ≤ hi", got.Lo, got.Hi, got.Mean)
			}
			// Symmetric on the log scale: lo·hi = mean².
			if !within(got.Lo*got.Hi, got.Mean*got.Mean, 1e-9*got.Mean*got.Mean) {
				t.Errorf("lo·hi = %v, want mean² = %v", got.Lo*got.Hi, got.Mean*got.Mean)
			}
		})
	}
}
