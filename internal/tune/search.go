package tune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"kvroute/sweep"
)

// Trial is one simulation of a search: a candidate policy on one replication of the point
// (its workload and router seeds: sweep.Point.WorkloadSeedOf).
type Trial struct {
	Spec sweep.PolicySpec
	Rep  int
}

// Runner runs trials and returns each one's objective value, out[i] of trials[i]. The
// search gives it one round at a time.
type Runner func(ctx context.Context, trials []Trial) ([]float64, error)

// Objective names the value a run is scored by and its direction.
type Objective struct {
	// Name is the metric ("ttft_p99_ms", "goodput_fraction").
	Name string `json:"name"`
	// Maximize is true for a value to raise (goodput), false for one to lower (latency).
	Maximize bool `json:"maximize"`
}

// loss is the score the search minimises over a candidate's values on the search seeds:
// the mean logarithm for a value to lower (so a ratio counts the same on every seed, as
// results/stats compares latencies), the negated mean for one to raise.
func (o Objective) loss(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		if o.Maximize {
			s -= v
		} else {
			s += math.Log(max(v, 1e-9))
		}
	}
	return s / float64(len(vs))
}

// aggregate is the candidate's value in the objective's unit: the geometric mean for a
// value to lower, the mean for one to raise.
func (o Objective) aggregate(loss float64) float64 {
	if o.Maximize {
		return -loss
	}
	return math.Exp(loss)
}

// Options control a search. Zero values take the defaults named.
type Options struct {
	// Seed draws the Latin hypercube; the workload seeds are the point's.
	Seed uint64 `json:"seed"`
	// SearchReps is the number of replications every candidate runs on, the same ones
	// for all (common random numbers): 10. They are replications 0..SearchReps−1.
	SearchReps int `json:"search_reps"`
	// Finalists is how many of the best candidates, the defaults always among them, run on
	// ValidationReps more replications (SearchReps..SearchReps+ValidationReps−1) before
	// one is picked by its loss over both sets: 4 and SearchReps. A candidate that won on
	// the search seeds by luck rarely wins on fresh ones too.
	Finalists      int `json:"finalists"`
	ValidationReps int `json:"validation_reps"`
	// FinalReps is the number of fresh replications, after the search's and the
	// validation's, on which tuned and default parameters are compared: 20.
	FinalReps int `json:"final_reps"`
	// Initial is the number of Latin hypercube candidates: max(8, 4 × parameters).
	Initial int `json:"initial"`
	// Rounds bounds the compass search's rounds after the hypercube: 12.
	Rounds int `json:"rounds"`
	// Step is the compass search's first step, as a share of each parameter's range
	// (0.25); it halves after a round with no better candidate, and the search ends when it
	// falls below MinStep (1/32).
	Step    float64 `json:"step"`
	MinStep float64 `json:"min_step"`
}

// withDefaults fills zero options for a space of dim parameters.
func (o Options) withDefaults(dim int) Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.SearchReps, 10)
	def(&o.Finalists, 4)
	def(&o.ValidationReps, o.SearchReps)
	def(&o.FinalReps, 20)
	def(&o.Initial, max(8, 4*dim))
	def(&o.Rounds, 12)
	if o.Step <= 0 {
		o.Step = 0.25
	}
	if o.MinStep <= 0 {
		o.MinStep = 1.0 / 32
	}
	return o
}

// MaxRuns is the most simulations a search of dim parameters and its comparison take:
// the defaults and the hypercube on the search replications, every compass round's 2 × dim
// neighbours on them too, the finalists on the validation replications, and the defaults
// and the tuned values on the fresh ones (the defaults alone with no parameters).
func (o Options) MaxRuns(dim int) int {
	o = o.withDefaults(dim)
	if dim == 0 {
		return o.SearchReps + o.FinalReps
	}
	return (1+o.Initial)*o.SearchReps + o.Rounds*2*dim*o.SearchReps + o.Finalists*o.ValidationReps + 2*o.FinalReps
}

// Validate rejects option values that cannot run.
func (o Options) Validate() error {
	var errs []error
	if o.SearchReps+o.ValidationReps+o.FinalReps > sweep.MaxReplications {
		errs = append(errs, fmt.Errorf("tune: replications: want at most %d", sweep.MaxReplications))
	}
	if o.Step > 1 || o.MinStep > 1 {
		errs = append(errs, errors.New("tune: step and min step: want at most 1, a share of each range"))
	}
	return errors.Join(errs...)
}

// Candidate is one evaluated set of parameter values.
type Candidate struct {
	// Round is 0 for the defaults and the hypercube, then the compass round that tried it.
	Round int `json:"round"`
	// Values are the searched parameters' values, in Space.Params order (NaN: unset).
	Values []float64 `json:"values"`
	unit   []float64 // its place in the unit cube (the defaults': defaultUnit)
	// PerRep are the objective's values on the search replications; a finalist's
	// Validation its values on the validation replications.
	PerRep     []float64 `json:"per_rep"`
	Validation []float64 `json:"validation,omitempty"`
	// Score is the objective over them (a finalist's over both sets): their geometric mean
	// for a value to lower, their mean for one to raise. SearchScore is over the search
	// replications alone, the same for every candidate.
	Score       float64 `json:"score"`
	SearchScore float64 `json:"search_score"`
	loss        float64
}

// Search is a search's record: every candidate, in the order evaluated.
type Search struct {
	Space     Space
	Objective Objective
	Options   Options
	// Candidates[0] is the defaults; Candidates[1:1+Options.Initial] the hypercube.
	Candidates []Candidate
	// Best indexes the finalist with the lowest loss over the search and validation
	// replications; the earliest of equals, so the defaults win a tie.
	Best int
	// Runs counts the simulations the search ran.
	Runs int
}

// Run searches space for the values that optimise obj, each candidate on the same
// opts.SearchReps replications through run.
func Run(ctx context.Context, space Space, obj Objective, opts Options, run Runner) (*Search, error) {
	opts = opts.withDefaults(space.Dim())
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Search{Space: space, Objective: obj, Options: opts}
	first := []point{{unit: defaultUnit(space), values: space.Defaults()}}
	if space.Dim() > 0 {
		for _, u := range hypercube(space.Dim(), opts.Initial, opts.Seed) {
			first = append(first, space.pointAt(u))
		}
	}
	if err := s.evaluate(ctx, run, 0, first); err != nil {
		return nil, err
	}
	step := opts.Step
	for round := 1; round <= opts.Rounds && step >= opts.MinStep && space.Dim() > 0; round++ {
		before := s.Best
		if err := s.evaluate(ctx, run, round, s.compass(step)); err != nil {
			return nil, err
		}
		if s.Best == before {
			step /= 2
		}
	}
	if space.Dim() > 0 {
		if err := s.validate(ctx, run); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// point is a candidate to evaluate: the values it runs, and its place in the unit cube,
// from which the compass search steps and along which Influence bins the hypercube.
type point struct {
	unit   []float64
	values []float64
}

// pointAt is the candidate at u in the unit cube.
func (s Space) pointAt(u []float64) point { return point{unit: u, values: s.Values(u)} }

// defaultUnit is the defaults' place in the unit cube: the values their Unit gives, which
// need not map back to the defaults (an unset value sits in the middle, Value rounds).
func defaultUnit(space Space) []float64 {
	u := make([]float64, space.Dim())
	for i, p := range space.Params {
		u[i] = space.Unit(i, p.Default)
	}
	return u
}

// hypercube draws n points of a Latin hypercube in [0, 1]^dim, seeded: along every axis
// each of the n equal strata holds exactly one point, at a uniform place within it (the
// rule of gonum's samplemv.LatinHypercube, whose distmv dependency pulls golang.org/x/tools
// into the module graph for this one loop).
func hypercube(dim, n int, seed uint64) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, dim)
	}
	for d := range dim {
		for i, stratum := range rng.Perm(n) {
			out[i][d] = (float64(stratum) + rng.Float64()) / float64(n)
		}
	}
	return out
}

// compass returns the unevaluated neighbours of the best candidate, step away along each
// axis in both directions (clamped to the cube). A neighbour differs from the best in that
// parameter alone: the others keep the values it ran, which for the defaults need not be
// the values of their place in the cube.
func (s *Search) compass(step float64) []point {
	center := s.Candidates[s.Best]
	seen := map[string]bool{}
	for _, c := range s.Candidates {
		seen[s.Space.Key(c.Values)] = true
	}
	var out []point
	for i := range center.unit {
		for _, d := range []float64{-step, step} {
			p := point{unit: slices.Clone(center.unit), values: slices.Clone(center.Values)}
			p.unit[i] = min(max(p.unit[i]+d, 0), 1)
			p.values[i] = s.Space.Value(i, p.unit[i])
			if k := s.Space.Key(p.values); !seen[k] {
				seen[k] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// evaluate runs the points of one round on the search replications and records them.
func (s *Search) evaluate(ctx context.Context, run Runner, round int, points []point) error {
	reps := s.Options.SearchReps
	var trials []Trial
	for _, p := range points {
		spec := s.Space.Spec(p.values)
		for r := range reps {
			trials = append(trials, Trial{Spec: spec, Rep: r})
		}
	}
	if len(trials) == 0 {
		return nil
	}
	vals, err := run(ctx, trials)
	if err != nil {
		return fmt.Errorf("tune: round %d: %w", round, err)
	}
	if len(vals) != len(trials) {
		return fmt.Errorf("tune: round %d: the runner returned %d values for %d trials", round, len(vals), len(trials))
	}
	s.Runs += len(trials)
	for k, p := range points {
		per := vals[k*reps : (k+1)*reps]
		loss := s.Objective.loss(per)
		if math.IsNaN(loss) {
			loss = math.Inf(1)
		}
		s.Candidates = append(s.Candidates, Candidate{Round: round, Values: p.values, unit: p.unit,
			PerRep: per, Score: s.Objective.aggregate(loss), SearchScore: s.Objective.aggregate(loss), loss: loss})
		if n := len(s.Candidates) - 1; loss < s.Candidates[s.Best].loss {
			s.Best = n
		}
	}
	return nil
}

// Tuned is the best candidate.
func (s *Search) Tuned() Candidate { return s.Candidates[s.Best] }
