package calibrate

import "time"

// setData is one set's measured and simulated requests, and, when every measurement of the
// set has server-side histograms, the servers' and the simulation's whole-run latencies.
type setData struct {
	measured, simulated Stats
	server              *[2]ServerStats // measured, simulated
}

// serverAcc sums server-side latencies over a set's measurements.
type serverAcc struct {
	meas, sim ServerStats
	n         int
	missing   bool
}

func (a *serverAcc) add(m Measurement, sim Simulated) {
	if m.Server == nil {
		a.missing = true
		return
	}
	a.meas, a.sim, a.n = a.meas.add(*m.Server), a.sim.add(simServer(sim)), a.n+1
}

func (a *serverAcc) result() *[2]ServerStats {
	if a.missing || a.n == 0 {
		return nil
	}
	return &[2]ServerStats{a.meas, a.sim}
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

// run replays the fit measurements (and, with holdout, the held-out ones) on rep and returns
// the fit set and, with holdout, the held-out set.
func (ev *evaluator) run(rep Replica, holdout bool) ([]setData, error) {
	var fitM, fitS, outM, outS []Observed
	var fitMI, fitSI, outMI, outSI []time.Duration
	var fitSrv, outSrv serverAcc
	split := len(ev.cfg.Holdout) == 0
	for _, m := range ev.cfg.Fit {
		sim, err := Replay(ev.ctx, rep, m)
		if err != nil {
			return nil, err
		}
		fitMI, fitSI = append(fitMI, m.ITLs...), append(fitSI, sim.ITLs...)
		fitSrv.add(m, sim) // whole runs: histograms do not split by request
		for i := range m.Requests {
			if split && (i+1)%ev.cfg.HoldoutEvery == 0 {
				outM, outS = append(outM, m.Requests[i]), append(outS, sim.Requests[i])
				continue
			}
			fitM, fitS = append(fitM, m.Requests[i]), append(fitS, sim.Requests[i])
		}
	}
	sets := []setData{{StatsOf(fitM, fitMI), StatsOf(fitS, fitSI), fitSrv.result()}}
	if !holdout {
		return sets, nil
	}
	for _, m := range ev.cfg.Holdout {
		sim, err := Replay(ev.ctx, rep, m)
		if err != nil {
			return nil, err
		}
		outM, outS = append(outM, m.Requests...), append(outS, sim.Requests...)
		outMI, outSI = append(outMI, m.ITLs...), append(outSI, sim.ITLs...)
		outSrv.add(m, sim)
	}
	// Held-out requests split from a fitted run share its steps: their gaps are not separable.
	return append(sets, setData{StatsOf(outM, outMI), StatsOf(outS, outSI), outSrv.result()}), nil
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
