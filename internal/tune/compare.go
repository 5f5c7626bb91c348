package tune

import (
	"context"
	"fmt"
	"math"
	"slices"

	"kvroute/results/stats"
)

// Comparison is tuned against default parameters on fresh replications, paired: both ran
// on each of Reps, which the search never used.
type Comparison struct {
	// Reps are the replications compared (0-based, after the search's).
	Reps []int `json:"reps"`
	// Default and Tuned are the objective's values on Reps.
	Default []float64 `json:"default"`
	Tuned   []float64 `json:"tuned"`
	// DefaultCI and TunedCI summarise them: geometric means for a value to lower, means for
	// one to raise, with 95% intervals.
	DefaultCI stats.Interval `json:"default_ci"`
	TunedCI   stats.Interval `json:"tuned_ci"`
	// Paired is tuned over default (a ratio of geometric means, from paired log
	// differences) for a value to lower, tuned − default for one to raise, with its 95%
	// interval; P is the paired t-test's two-sided p-value.
	Paired stats.Interval `json:"paired"`
	P      float64        `json:"p"`
	// Verdict is "better", "worse", "within noise", "defaults kept" (no candidate beat
	// the defaults on the search and validation seeds) or "no parameters".
	Verdict string `json:"verdict"`
}

// Verdicts.
const (
	VerdictBetter = "better"
	VerdictWorse  = "worse"
	VerdictNoise  = "within noise"
	VerdictKept   = "defaults kept"
	VerdictNone   = "no parameters"
)

// Compare runs the defaults and the search's best on opts.FinalReps fresh replications
// (those after the search's and the validation's) and compares them pairwise.
func Compare(ctx context.Context, s *Search, run Runner) (Comparison, error) {
	o := s.Options
	c := Comparison{}
	for r := range o.FinalReps {
		c.Reps = append(c.Reps, o.firstFinalRep()+r)
	}
	kept := s.Best == 0
	var trials []Trial
	for _, r := range c.Reps {
		trials = append(trials, Trial{Spec: s.Space.Spec(s.Space.Defaults()), Rep: r})
	}
	if !kept {
		for _, r := range c.Reps {
			trials = append(trials, Trial{Spec: s.Space.Spec(s.Tuned().Values), Rep: r})
		}
	}
	vals, err := run(ctx, trials)
	if err != nil {
		return c, fmt.Errorf("tune: the comparison on fresh seeds: %w", err)
	}
	if len(vals) != len(trials) {
		return c, fmt.Errorf("tune: the runner returned %d values for %d trials", len(vals), len(trials))
	}
	s.Runs += len(trials)
	n := len(c.Reps)
	c.Default, c.Tuned = vals[:n], vals[:n]
	if !kept {
		c.Tuned = vals[n:]
	}
	c.summarise(s.Objective, kept)
	if s.Space.Dim() == 0 {
		c.Verdict = VerdictNone
	}
	return c, nil
}

// firstFinalRep is the first replication after the search's and the validation's.
func (o Options) firstFinalRep() int { return o.SearchReps + o.ValidationReps }

// summarise fills the intervals and the verdict from the paired values.
func (c *Comparison) summarise(obj Objective, kept bool) {
	summary := stats.GeoMeanCI
	if obj.Maximize {
		summary = stats.MeanCI
	}
	c.DefaultCI, c.TunedCI = summary(c.Default), summary(c.Tuned)
	c.Paired, c.P = stats.PairedT(c.Tuned, c.Default, !obj.Maximize)
	none := 0.0 // the paired value of no difference
	if !obj.Maximize {
		none = 1
	}
	better := c.Paired.Hi < none
	worse := c.Paired.Lo > none
	if obj.Maximize {
		better, worse = worse, better
	}
	switch {
	case kept:
		c.Verdict = VerdictKept
	case !c.Paired.Excludes(none):
		c.Verdict = VerdictNoise
	case better:
		c.Verdict = VerdictBetter
	default:
		c.Verdict = VerdictWorse
	}
}

// Influence measures how much each searched parameter moves the objective over the Latin
// hypercube's candidates: the correlation ratio η² (the share of the loss's variance that
// the means of equal-count bins of the parameter explain, a first-order sensitivity index
// that also sees effects that are not monotone). The hypercube spreads every parameter
// evenly, so the bins are comparable. Bins: ⌊√n⌋, at least 2. Values are in [0, 1]; NaN
// with fewer than 4 candidates or no spread.
func (s *Search) Influence() []float64 {
	var lhs []Candidate
	for _, c := range s.Candidates[1:] {
		if c.Round == 0 && !math.IsInf(c.loss, 0) {
			lhs = append(lhs, c)
		}
	}
	out := make([]float64, s.Space.Dim())
	for i := range out {
		out[i] = correlationRatio(lhs, i)
	}
	return out
}

func correlationRatio(cs []Candidate, dim int) float64 {
	n := len(cs)
	if n < 4 {
		return math.NaN()
	}
	order := slices.Clone(cs)
	slices.SortStableFunc(order, func(a, b Candidate) int {
		switch {
		case a.unit[dim] < b.unit[dim]:
			return -1
		case a.unit[dim] > b.unit[dim]:
			return 1
		}
		return 0
	})
	var mean float64
	for _, c := range order {
		mean += c.loss / float64(n)
	}
	bins := max(2, int(math.Sqrt(float64(n))))
	var between, total float64
	for b := range bins {
		part := order[b*n/bins : (b+1)*n/bins]
		var m float64
		for _, c := range part {
			m += c.loss / float64(len(part))
			total += (c.loss - mean) * (c.loss - mean)
		}
		between += float64(len(part)) * (m - mean) * (m - mean)
	}
	if total == 0 {
		return math.NaN()
	}
	return between / total
}

// TopTwo returns the indexes of the two most influential parameters, by Influence,
// ties and NaN in parameter order; fewer when there are fewer parameters.
func TopTwo(influence []float64) []int {
	idx := make([]int, len(influence))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) float64 {
		if math.IsNaN(influence[i]) {
			return -1
		}
		return influence[i]
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case key(a) > key(b):
			return -1
		case key(a) < key(b):
			return 1
		}
		return 0
	})
	return idx[:min(2, len(idx))]
}
