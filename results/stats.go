package results

import (
	"math"

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
