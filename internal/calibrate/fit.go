package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/optimize"

	"kvroute/gpumodel"
)

// FitConfig is one calibration: the replica to start from, the measurements to fit and
// those that check the fit.
type FitConfig struct {
	// Base is the replica as the catalog describes it; its GPU efficiencies are the start.
	Base Replica
	// Fit are the measurements the parameters are fitted to.
	Fit []Measurement
	// Holdout are measurements kept out of the fit to check it. When empty, every
	// HoldoutEvery-th request of each Fit measurement (counting from 1) is held out instead:
	// it is still replayed (it was part of the load) but its latencies are not fitted.
	Holdout []Measurement
	// HoldoutEvery is the held-out stride when Holdout is empty, at least 2 (default 5).
	HoldoutEvery int
	// MaxEvaluations bounds the simulations of the search, at least 1 (default 150).
	MaxEvaluations int
	// FixNetworkDelay keeps Base.NetworkDelay instead of fitting it. Measured latencies are
	// the client's, so they hold an HTTP hop the engine does not see; fitting it as the
	// simulator's one-way network delay keeps that hop out of the efficiencies. When every
	// Fit measurement has server-side histograms (Measurement.Server) the fit uses those,
	// which hold no hop: the replays then run with no network delay (Base.NetworkDelay is
	// taken as 0 and not fitted) whatever this says.
	FixNetworkDelay bool
}

// ServerSide reports whether c fits server-side latencies: every Fit measurement has them.
func (c FitConfig) ServerSide() bool {
	for _, m := range c.Fit {
		if m.Server == nil {
			return false
		}
	}
	return len(c.Fit) > 0
}

// Validate reports every problem with c, joined.
func (c FitConfig) Validate() error {
	var errs []error
	if len(c.Fit) == 0 {
		errs = append(errs, errors.New("calibrate: no measurements to fit"))
	}
	for _, m := range append(append([]Measurement(nil), c.Fit...), c.Holdout...) {
		errs = append(errs, m.Validate())
	}
	if c.HoldoutEvery != 0 && c.HoldoutEvery < 2 {
		errs = append(errs, fmt.Errorf("calibrate: holdout stride %d: want >= 2", c.HoldoutEvery))
	}
	if c.MaxEvaluations < 0 {
		errs = append(errs, fmt.Errorf("calibrate: max evaluations %d: want >= 1", c.MaxEvaluations))
	}
	errs = append(errs, c.Base.Deployment.Validate())
	return errors.Join(errs...)
}

// Comparison holds one set of requests' statistics: measured, simulated with the base
// parameters and simulated with the fitted ones.
type Comparison struct {
	// Set is "fit" or "held-out".
	Set                     string
	Measured, Before, After Stats
	// Server, when every measurement of the set has server-side histograms, compares the
	// servers' whole-run latencies with the simulation's.
	Server *ServerComparison
}

// ServerComparison is one set's server-side latencies: measured by the vLLM servers, and the
// simulation's counterparts with the base and the fitted parameters.
type ServerComparison struct {
	Measured, Before, After ServerStats
}

// FitResult is a calibration's outcome.
type FitResult struct {
	// Before and After are the parameters the search started from and ended at.
	Before, After Params
	// Fitted names the parameters the search moved (link only with TP > 1).
	Fitted []string
	// ServerSide reports that the search fitted the servers' histogram means (TTFT, TPOT,
	// E2E) instead of the client's request latencies, with the network delay at 0 and not
	// fitted (the histograms hold no HTTP hop).
	ServerSide bool
	// Evaluations is the number of simulations the search ran; Loss the fit's final error
	// (mean squared log ratio of simulated to measured, over the fitted metrics).
	Evaluations int
	Loss        float64
	// Sets compare the fit and held-out requests before and after.
	Sets []Comparison
}

// minEfficiency is the lower bound of every fitted efficiency: a step at 1% of a peak is
// beyond any GPU a catalog should describe. The upper bound, 1, keeps every step at or above
// its FLOP and HBM floors (gpumodel.Pricer.FLOPFloor, MemoryFloor).
const minEfficiency = 0.01

// Params are what a calibration fits: the GPU's efficiencies and the client↔replica delay.
type Params struct {
	// Efficiency is the GPU's, each in (0, 1].
	Efficiency gpumodel.Efficiency
	// NetworkDelay is the one-way client↔replica delay (a sweep's router.network_delay).
	NetworkDelay time.Duration
}

// param is one fitted parameter: its name, and how a search coordinate maps to it.
type param struct {
	name string
	get  func(Params) float64
	set  func(*Params, float64)
	to   func(x float64) float64 // coordinate → value
	from func(v float64) float64 // value → coordinate
}

func effParam(name string, f func(*gpumodel.Efficiency) *float64) param {
	return param{name: name, to: toEff, from: fromEff,
		get: func(p Params) float64 { return *f(&p.Efficiency) },
		set: func(p *Params, v float64) { *f(&p.Efficiency) = v }}
}

// delayParam maps a coordinate to a delay of softplus(x) = ln(1 + e^x) ms: positive, about
// linear above 1 ms. The search starts at 0.5 ms at least, where the losses of neighbouring
// delays differ: from 0 it would see no slope.
var delayParam = param{name: "network_delay_ms",
	get:  func(p Params) float64 { return float64(p.NetworkDelay) / 1e6 },
	set:  func(p *Params, v float64) { p.NetworkDelay = time.Duration(math.Round(v * 1e6)) },
	to:   func(x float64) float64 { return math.Log1p(math.Exp(min(x, 700))) },
	from: func(v float64) float64 { return math.Log(math.Expm1(min(max(v, 0.5), 700))) },
}

func params(tp int, delay bool) []param {
	ps := []param{
		effParam("prefill_mfu", func(e *gpumodel.Efficiency) *float64 { return &e.PrefillMFU }),
		effParam("decode_mfu", func(e *gpumodel.Efficiency) *float64 { return &e.DecodeMFU }),
		effParam("memory", func(e *gpumodel.Efficiency) *float64 { return &e.Memory }),
	}
	if tp > 1 {
		ps = append(ps, effParam("link", func(e *gpumodel.Efficiency) *float64 { return &e.Link }))
	}
	if delay {
		ps = append(ps, delayParam)
	}
	return ps
}

// toEff maps an unbounded search coordinate to (minEfficiency, 1) (a logistic), and fromEff
// is its inverse: Nelder–Mead searches an unbounded space, the replica gets bounded values.
func toEff(x float64) float64 { return minEfficiency + (1-minEfficiency)/(1+math.Exp(-x)) }

func fromEff(e float64) float64 {
	e = min(max(e, minEfficiency+1e-9), 1-1e-9)
	u := (e - minEfficiency) / (1 - minEfficiency)
	return math.Log(u / (1 - u))
}

// Fit searches the base replica's GPU efficiencies (each kept in (0.01, 1) by a logistic
// transform) and network delay (>= 0) with gonum's Nelder–Mead for the simulation that best
// reproduces the fit requests' TTFT (mean, median), TPOT (mean, median) and E2E mean, each
// evaluation a replay of every Fit measurement. It then replays the fit and held-out requests
// with the parameters before and after, for the report.
func Fit(ctx context.Context, c FitConfig) (FitResult, error) {
	if err := c.Validate(); err != nil {
		return FitResult{}, err
	}
	c.HoldoutEvery = cmpOr(c.HoldoutEvery, 5)
	c.MaxEvaluations = cmpOr(c.MaxEvaluations, 150)
	server := c.ServerSide()
	if server {
		// The servers' histograms have no HTTP hop in them: neither may the replay.
		c.Base.NetworkDelay = 0
	}
	ps := params(c.Base.Deployment.TP, !c.FixNetworkDelay && !server)
	start := Params{Efficiency: c.Base.Deployment.GPU.Efficiency, NetworkDelay: c.Base.NetworkDelay}
	ev := newEvaluator(ctx, c, ps, server)
	x0 := make([]float64, len(ps))
	for i, p := range ps {
		x0[i] = p.from(p.get(start))
	}
	res, err := optimize.Minimize(optimize.Problem{Func: ev.loss}, x0,
		&optimize.Settings{FuncEvaluations: c.MaxEvaluations, Concurrent: 1,
			Converger: &optimize.FunctionConverge{Absolute: 1e-7, Iterations: 30}},
		&optimize.NelderMead{SimplexSize: 0.5})
	if ev.err != nil {
		return FitResult{}, ev.err
	}
	if err != nil && res == nil {
		return FitResult{}, fmt.Errorf("calibrate: fit: %w", err)
	}
	out := FitResult{Before: start, After: ev.point(res.X), ServerSide: server, Evaluations: ev.n, Loss: res.F}
	for _, p := range ps {
		out.Fitted = append(out.Fitted, p.name)
	}
	if out.Sets, err = ev.compare(out.Before, out.After); err != nil {
		return FitResult{}, err
	}
	return out, nil
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// evaluator runs the simulations of one Fit (newEvaluator). Index 0 of traces and measured
// is the fit set's, 1 the held-out set's.
type evaluator struct {
	cfg      FitConfig
	ctx      context.Context
	params   []param
	server   bool           // fit the server-side histograms' means
	traces   [2][]string    // per Fit and per Holdout measurement, its replay trace (traceOf)
	measured [2]measuredSet // the sets' measured side
	n        int
	err      error // the first simulation error; the search sees +Inf
}

// point returns the base parameters with the search coordinates x applied.
func (ev *evaluator) point(x []float64) Params {
	p := Params{Efficiency: ev.cfg.Base.Deployment.GPU.Efficiency, NetworkDelay: ev.cfg.Base.NetworkDelay}
	for i, q := range ev.params {
		q.set(&p, q.to(x[i]))
	}
	return p
}

func (ev *evaluator) replica(p Params) Replica {
	r := ev.cfg.Base
	r.Deployment.GPU.Efficiency, r.NetworkDelay = p.Efficiency, p.NetworkDelay
	return r
}

// loss is the search objective at x.
func (ev *evaluator) loss(x []float64) float64 {
	if ev.err != nil {
		return math.Inf(1)
	}
	ev.n++
	sets, err := ev.run(ev.replica(ev.point(x)), false)
	if err != nil {
		ev.err = err
		return math.Inf(1)
	}
	if ev.server {
		return serverLoss(sets[0].server[0], sets[0].server[1])
	}
	return lossOf(sets[0].measured, sets[0].simulated)
}

// serverLoss is the mean squared log ratio of simulated to measured server-side means: TTFT,
// TPOT and E2E.
func serverLoss(meas, sim ServerStats) float64 {
	return logRatioLoss([][2]float64{{meas.TTFT.MeanMS(), sim.TTFT.MeanMS()},
		{meas.TPOT.MeanMS(), sim.TPOT.MeanMS()}, {meas.E2E.MeanMS(), sim.E2E.MeanMS()}})
}

// lossOf is the mean squared log ratio of simulated to measured over the fitted metrics.
func lossOf(meas, sim Stats) float64 {
	return logRatioLoss([][2]float64{{meas.TTFTMean, sim.TTFTMean}, {meas.TTFTp50, sim.TTFTp50},
		{meas.TPOTMean, sim.TPOTMean}, {meas.TPOTp50, sim.TPOTp50}, {meas.E2EMean, sim.E2EMean}})
}

// logRatioLoss is the mean squared log ratio over the (measured, simulated) pairs whose
// measured value is positive; +Inf when none is, or a simulated one is not.
func logRatioLoss(pairs [][2]float64) float64 {
	s, n := 0.0, 0
	for _, p := range pairs {
		if p[0] <= 0 {
			continue // no such requests (one-token answers have no TPOT)
		}
		if p[1] <= 0 {
			return math.Inf(1)
		}
		d := math.Log(p[1] / p[0])
		s += d * d
		n++
	}
	if n == 0 {
		return math.Inf(1)
	}
	return s / float64(n)
}
