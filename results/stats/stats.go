package stats

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Confidence is the two-sided confidence level of every interval in a report.
const Confidence = 0.95

// Interval is a sample mean with its two-sided Student-t confidence interval at Confidence.
// With fewer than two samples Lo and Hi equal Mean and HalfWidth is NaN (written as null):
// one replication says nothing about noise.
type Interval struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"ci_lo"`
	Hi   float64 `json:"ci_hi"`
	// N is the number of samples (replications).
	N int `json:"n"`
}

// MeanCI returns the mean of xs and its confidence interval mean ± t(1−α/2, n−1)·s/√n, with
// s the sample standard deviation (gonum's stat.MeanStdDev) and t the Student-t quantile
// (gonum's distuv.StudentsT). It is the interval of a one-sample t-test; applied to paired
// differences it is the paired t-test's.
func MeanCI(xs []float64) Interval {
	n := len(xs)
	if n == 0 {
		return Interval{Mean: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	mean, sd := stat.MeanStdDev(xs, nil)
	if n < 2 {
		return Interval{Mean: mean, Lo: mean, Hi: mean, N: n}
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(1 - (1-Confidence)/2)
	h := t * stat.StdErr(sd, float64(n))
	return Interval{Mean: mean, Lo: mean - h, Hi: mean + h, N: n}
}

// Tested reports whether the interval came from at least two samples.
func (iv Interval) Tested() bool { return iv.N >= 2 }

// Excludes reports whether v lies outside the interval: for an interval of paired
// differences, Excludes(0) is a significant difference at level 1 − Confidence.
func (iv Interval) Excludes(v float64) bool { return iv.Tested() && (v < iv.Lo || v > iv.Hi) }

// PairedDiff returns the interval of the differences a[i] − b[i] (the pairs are
// replications that saw the same requests).
func PairedDiff(a, b []float64) Interval {
	d := make([]float64, min(len(a), len(b)))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	return MeanCI(d)
}

// PairedRatio returns the interval of the ratio a/b as exp of the interval of the paired
// differences of logarithms (a geometric mean ratio): the right scale for latencies, whose
// spread grows with their size. Non-positive values are floored at 1e-9 first.
func PairedRatio(a, b []float64) Interval {
	la, lb := logs(a), logs(b)
	iv := PairedDiff(la, lb)
	return Interval{Mean: math.Exp(iv.Mean), Lo: math.Exp(iv.Lo), Hi: math.Exp(iv.Hi), N: iv.N}
}

func logs(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Log(max(x, 1e-9))
	}
	return out
}

// PairedT returns the interval of the paired differences a[i] − b[i] (on a log scale, and
// then as a ratio a/b, when ratio is set) and the two-sided p-value of the paired t-test of
// no difference: 2·(1 − F(|t|)) for t = mean/(s/√n) and F the Student-t CDF with n − 1
// degrees of freedom. With fewer than two pairs p is 1; with no spread p is 0 for a nonzero
// difference and 1 otherwise.
func PairedT(a, b []float64, ratio bool) (Interval, float64) {
	if ratio {
		a, b = logs(a), logs(b)
	}
	d := make([]float64, min(len(a), len(b)))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	iv := MeanCI(d)
	p := 1.0
	if n := len(d); n >= 2 {
		_, sd := stat.MeanStdDev(d, nil)
		switch se := stat.StdErr(sd, float64(n)); {
		case se > 0:
			t := math.Abs(iv.Mean) / se
			p = 2 * (1 - distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.CDF(t))
		case iv.Mean != 0:
			p = 0
		}
	}
	if ratio {
		iv = Interval{Mean: math.Exp(iv.Mean), Lo: math.Exp(iv.Lo), Hi: math.Exp(iv.Hi), N: iv.N}
	}
	return iv, p
}

// Holm returns which of the hypotheses with p-values p are rejected at family-wise error
// rate alpha by Holm's step-down procedure (Holm 1979, "A simple sequentially rejective
// multiple test procedure", Scand. J. Statist. 6(2)): sorted ascending, the k-th smallest
// (0-based) is rejected while p ≤ alpha/(m − k).
func Holm(p []float64, alpha float64) []bool {
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(p[a], p[b]) })
	out := make([]bool, len(p))
	for k, i := range idx {
		if p[i] > alpha/float64(len(p)-k) {
			break
		}
		out[i] = true
	}
	return out
}

// MarshalJSON writes the interval, with null for a value that is not finite.
func (iv Interval) MarshalJSON() ([]byte, error) {
	f := func(v float64) any {
		if v != v || v > 1e308 || v < -1e308 {
			return nil
		}
		return v
	}
	return json.Marshal(map[string]any{"mean": f(iv.Mean), "ci_lo": f(iv.Lo), "ci_hi": f(iv.Hi), "n": iv.N})
}

// GeoMeanCI returns the geometric mean of xs with its confidence interval, back-transformed
// from the Student-t interval of the mean of their logarithms (MeanCI of ln x): the scale
// latencies are compared on, where an interval never reaches below zero. Non-positive values
// are floored at 1e-9 first.
func GeoMeanCI(xs []float64) Interval {
	iv := MeanCI(logs(xs))
	return Interval{Mean: math.Exp(iv.Mean), Lo: math.Exp(iv.Lo), Hi: math.Exp(iv.Hi), N: iv.N}
}
