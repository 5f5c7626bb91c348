package calibrate

import (
	"context"
	"time"
)

// setData is one set's measured and simulated requests, and, when every measurement of the
// set has server-side histograms, the servers' and the simulation's whole-run latencies.
type setData struct {
	measured, simulated Stats
	server              *[2]ServerStats // measured, simulated
}

// runData is one run's requests, inter-token gaps and, when measured by the servers too,
// server-side latencies: a measurement, or its replay.
type runData struct {
	reqs   []Observed
	itls   []time.Duration
	server *ServerStats
}

// group is one set's requests and gaps, and its runs' server-side latencies summed.
type group struct {
	reqs    []Observed
	itls    []time.Duration
	server  ServerStats
	runs    int // whole runs added (their gaps and histograms)
	servers int // how many of those had server-side latencies
}

// addRun adds a whole run's gaps and server-side latencies to g. Neither splits by request:
// a fit run's count whole in the fit set even when some of its requests are held out.
func (g *group) addRun(r runData) {
	g.itls = append(g.itls, r.itls...)
	g.runs++
	if r.server != nil {
		g.server, g.servers = g.server.add(*r.server), g.servers+1
	}
}

// serverStats returns the set's server-side latencies, or nil unless every run had them.
func (g *group) serverStats() *ServerStats {
	if g.runs == 0 || g.servers < g.runs {
		return nil
	}
	s := g.server
	return &s
}

// gather splits runs into the fit set (index 0) and the held-out set (1): the fit runs go
// to the fit set, but for every HoldoutEvery-th request of each when there are no held-out
// measurements, which goes to the held-out set; the held-out runs go to the held-out set.
// The same split serves the measurements and their replays.
func (ev *evaluator) gather(fit, held []runData) [2]group {
	var g [2]group
	split := len(ev.cfg.Holdout) == 0
	for _, r := range fit {
		g[0].addRun(r)
		for i, o := range r.reqs {
			k := 0
			if split && (i+1)%ev.cfg.HoldoutEvery == 0 {
				k = 1
			}
			g[k].reqs = append(g[k].reqs, o)
		}
	}
	for _, r := range held {
		g[1].addRun(r)
		g[1].reqs = append(g[1].reqs, r.reqs...)
	}
	return g
}

// measuredSet is one set's measured side: computed once, when the evaluator is built.
type measuredSet struct {
	stats  Stats
	server *ServerStats // nil unless every run of the set had server-side latencies
}

// newEvaluator renders each measurement's trace and computes the measured side of both sets
// once: the search's evaluations only replay and compute the simulated side.
func newEvaluator(ctx context.Context, c FitConfig, ps []param, server bool) *evaluator {
	ev := &evaluator{cfg: c, ctx: ctx, params: ps, server: server}
	var runs [2][]runData
	for k, ms := range [2][]Measurement{c.Fit, c.Holdout} {
		for _, m := range ms {
			ev.traces[k] = append(ev.traces[k], traceOf(m.Requests))
			runs[k] = append(runs[k], runData{reqs: m.Requests, itls: m.ITLs, server: m.Server})
		}
	}
	for k, g := range ev.gather(runs[0], runs[1]) {
		ev.measured[k] = measuredSet{StatsOf(g.reqs, g.itls), g.serverStats()}
	}
	return ev
}

// simServer returns a replay's counterparts of the server-side histograms: TTFT, E2E and
// decode time (last token − first) per request, and TPOT per inter-token gap, all on the
// engine's side when the replica has no network delay. Prefill and queue time have no
// counterpart (the simulator's records carry no scheduling time) and stay empty.
func simServer(sim Simulated) ServerStats {
	var s ServerStats
	for _, r := range sim.Requests {
		s.TTFT = s.TTFT.add(Moment{r.TTFT.Seconds(), 1})
		s.E2E = s.E2E.add(Moment{r.E2E.Seconds(), 1})
		s.Decode = s.Decode.add(Moment{(r.E2E - r.TTFT).Seconds(), 1})
	}
	for _, d := range sim.ITLs {
		s.TPOT = s.TPOT.add(Moment{d.Seconds(), 1})
	}
	return s
}

// replayAll replays the measurements ms, whose traces are traces, on rep. A replay carries
// server-side latencies where its measurement has them.
func (ev *evaluator) replayAll(rep Replica, ms []Measurement, traces []string) ([]runData, error) {
	out := make([]runData, len(ms))
	for i, m := range ms {
		sim, err := replay(ev.ctx, rep, m, traces[i])
		if err != nil {
			return nil, err
		}
		out[i] = runData{reqs: sim.Requests, itls: sim.ITLs}
		if m.Server != nil {
			s := simServer(sim)
			out[i].server = &s
		}
	}
	return out, nil
}

// run replays the fit measurements (and, with holdout, the held-out ones) on rep and returns
// the fit set and, with holdout, the held-out set.
func (ev *evaluator) run(rep Replica, holdout bool) ([]setData, error) {
	fit, err := ev.replayAll(rep, ev.cfg.Fit, ev.traces[0])
	if err != nil {
		return nil, err
	}
	var held []runData
	if holdout {
		if held, err = ev.replayAll(rep, ev.cfg.Holdout, ev.traces[1]); err != nil {
			return nil, err
		}
	}
	// Held-out requests split from a fitted run share its steps: their gaps are not separable.
	g := ev.gather(fit, held)
	sets := make([]setData, 1, 2)
	if holdout {
		sets = sets[:2]
	}
	for k := range sets {
		m := ev.measured[k]
		sets[k] = setData{measured: m.stats, simulated: StatsOf(g[k].reqs, g[k].itls)}
		if sim := g[k].serverStats(); m.server != nil && sim != nil {
			sets[k].server = &[2]ServerStats{*m.server, *sim}
		}
	}
	return sets, nil
}

// compare replays everything with the efficiencies before and after the fit.
func (ev *evaluator) compare(before, after Params) ([]Comparison, error) {
	b, err := ev.run(ev.replica(before), true)
	if err != nil {
		return nil, err
	}
	a, err := ev.run(ev.replica(after), true)
	if err != nil {
		return nil, err
	}
	out := []Comparison{
		{Set: "fit", Measured: b[0].measured, Before: b[0].simulated, After: a[0].simulated},
		{Set: "held-out", Measured: b[1].measured, Before: b[1].simulated, After: a[1].simulated},
	}
	for i := range out {
		if b[i].server != nil {
			out[i].Server = &ServerComparison{Measured: b[i].server[0], Before: b[i].server[1], After: a[i].server[1]}
		}
	}
	return out, nil
}
