package tune

import (
	"context"
	"fmt"
	"math"

	"kvroute/results"
	"kvroute/router"
	"kvroute/sweep"
)

// Objectives of a sweep point's runs.
var (
	// TTFTP99 is the p99 time to first token in milliseconds, to lower.
	TTFTP99 = Objective{Name: "ttft_p99_ms"}
	// GoodputFraction is the share of requests that met the point's SLO (results.Goodput),
	// to raise. The share, not goodput per second: a run's duration includes its drain
	// tail, which the policy moves too.
	GoodputFraction = Objective{Name: "goodput_fraction", Maximize: true}
)

// ObjectiveOf is the point's objective: goodput under its SLO when it sets one, p99 TTFT
// otherwise.
func ObjectiveOf(p sweep.Point) Objective {
	if p.SLO().Enabled() {
		return GoodputFraction
	}
	return TTFTP99
}

// Value reads the objective from a run's metrics.
func (o Objective) Value(m results.Metrics) (float64, error) {
	switch o.Name {
	case TTFTP99.Name:
		return m.TTFT.P99, nil
	case GoodputFraction.Name:
		if m.Goodput == nil {
			return math.NaN(), fmt.Errorf("tune: objective %s: the run has no SLO", o.Name)
		}
		return m.Goodput.Fraction, nil
	}
	return math.NaN(), fmt.Errorf("tune: unknown objective %q", o.Name)
}

// SimRunner runs trials as simulations of point p, parallel at a time. A trial whose
// parameters the policy rejects (its Validate) scores as the worst value (+Inf to lower,
// −Inf to raise) instead of failing the search, so bounds may reach into invalid
// combinations.
func SimRunner(p sweep.Point, obj Objective, parallel int) Runner {
	return func(ctx context.Context, trials []Trial) ([]float64, error) {
		out := make([]float64, len(trials))
		var jobs []sweep.Job
		var at []int
		for i, t := range trials {
			if _, err := router.Builtin().New(t.Spec.Name, t.Spec.Params, 0); err != nil {
				out[i] = math.Inf(1)
				if obj.Maximize {
					out[i] = math.Inf(-1)
				}
				continue
			}
			jobs = append(jobs, Job(p, t, len(jobs)))
			at = append(at, i)
		}
		runs, err := sweep.RunAll(ctx, jobs, parallel, func(ctx context.Context, j sweep.Job) (results.Run, error) {
			return j.Execute(ctx, nil, func() {})
		}, nil)
		if err != nil {
			return nil, err
		}
		for k, r := range runs {
			if out[at[k]], err = obj.Value(r.Metrics); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// Job is the sweep job of trial t on point p, with index i in its batch.
func Job(p sweep.Point, t Trial, i int) sweep.Job {
	p.Replications = max(p.Replications, t.Rep+1)
	p.Policies = []sweep.PolicySpec{t.Spec}
	name := results.RepName(t.Spec.Label(), t.Rep+1)
	return sweep.Job{Index: i, Name: name, Point: p, Policy: t.Spec, Rep: t.Rep}
}
