package tune

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
)

// validate runs the finalists, the defaults and the best others of the search, on the
// validation replications and makes the one with the lowest loss over both sets Best.
func (s *Search) validate(ctx context.Context, run Runner) error {
	o := s.Options
	finalists := s.finalists()
	var trials []Trial
	for _, i := range finalists {
		spec := s.Space.Spec(s.Candidates[i].Values)
		for r := range o.ValidationReps {
			trials = append(trials, Trial{Spec: spec, Rep: o.SearchReps + r})
		}
	}
	vals, err := run(ctx, trials)
	if err != nil {
		return fmt.Errorf("tune: validation: %w", err)
	}
	if len(vals) != len(trials) {
		return fmt.Errorf("tune: validation: the runner returned %d values for %d trials", len(vals), len(trials))
	}
	s.Runs += len(trials)
	best, bestLoss := 0, math.Inf(1)
	for k, i := range finalists {
		c := &s.Candidates[i]
		c.Validation = vals[k*o.ValidationReps : (k+1)*o.ValidationReps]
		loss := s.Objective.loss(append(slices.Clone(c.PerRep), c.Validation...))
		if math.IsNaN(loss) {
			loss = math.Inf(1)
		}
		c.Score = s.Objective.aggregate(loss)
		if loss < bestLoss || (loss == bestLoss && i < best) {
			best, bestLoss = i, loss
		}
	}
	s.Best = best
	return nil
}

// finalists are the indexes of the defaults and of the other candidates with the lowest
// search loss, Options.Finalists in all, ascending.
func (s *Search) finalists() []int {
	order := make([]int, 0, len(s.Candidates))
	for i := 1; i < len(s.Candidates); i++ {
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(s.Candidates[a].loss, s.Candidates[b].loss) })
	out := append([]int{0}, order[:min(len(order), s.Options.Finalists-1)]...)
	slices.Sort(out)
	return out
}
