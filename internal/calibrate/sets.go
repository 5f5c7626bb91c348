package calibrate

import "time"

// setData is one set's measured and simulated requests.
type setData struct {
	measured, simulated Stats
}

// run replays the fit measurements (and, with holdout, the held-out ones) on rep and returns
// the fit set and, with holdout, the held-out set.
func (ev *evaluator) run(rep Replica, holdout bool) ([]setData, error) {
	var fitM, fitS, outM, outS []Observed
	var fitMI, fitSI, outMI, outSI []time.Duration
	split := len(ev.cfg.Holdout) == 0
	for _, m := range ev.cfg.Fit {
		sim, err := Replay(ev.ctx, rep, m)
		if err != nil {
			return nil, err
		}
		fitMI, fitSI = append(fitMI, m.ITLs...), append(fitSI, sim.ITLs...)
		for i := range m.Requests {
			if split && (i+1)%ev.cfg.HoldoutEvery == 0 {
				outM, outS = append(outM, m.Requests[i]), append(outS, sim.Requests[i])
				continue
			}
			fitM, fitS = append(fitM, m.Requests[i]), append(fitS, sim.Requests[i])
		}
	}
	sets := []setData{{StatsOf(fitM, fitMI), StatsOf(fitS, fitSI)}}
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
	}
	// Held-out requests split from a fitted run share its steps: their gaps are not separable.
	return append(sets, setData{StatsOf(outM, outMI), StatsOf(outS, outSI)}), nil
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
	return []Comparison{
		{Set: "fit", Measured: b[0].measured, Before: b[0].simulated, After: a[0].simulated},
		{Set: "held-out", Measured: b[1].measured, Before: b[1].simulated, After: a[1].simulated},
	}, nil
}
