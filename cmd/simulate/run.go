package main

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"kvroute/internal/sweep"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/workloads"
)

// job is one run of a sweep: a point with one policy, in one replication (0-based).
type job struct {
	index  int
	name   string
	point  Point
	policy sweep.PolicySpec
	rep    int
}

// plan lists the runs of the points, replications, then policies inner, in a fixed order.
// With several replications a run's name ends in its replication number (results.RepName).
func plan(points []Point) []job {
	var jobs []job
	for _, p := range points {
		for rep := range p.Reps() {
			for _, ps := range p.Policies {
				name := ps.Label()
				if l := p.Label(); l != "base" {
					name += "/" + l
				}
				if p.Reps() > 1 {
					name = results.RepName(name, rep+1)
				}
				jobs = append(jobs, job{index: len(jobs), name: name, point: p, policy: ps, rep: rep})
			}
		}
	}
	return jobs
}

// replication is the run's 1-based replication number, 0 without replications.
func (j job) replication() int {
	if j.point.Reps() > 1 {
		return j.rep + 1
	}
	return 0
}

// scenario is what summary.json records about a run's setting.
func (j job) scenario() map[string]any {
	p := j.point
	rel, _ := p.release() // validated before the run
	s := map[string]any{
		"name": p.Name, "seed": p.Seed, "policy_params": j.policy.Params,
		"fleet": map[string]any{"replicas": p.Fleet.Replicas, "gpu": p.Fleet.GPU, "model": p.Fleet.Model, "tp": max(p.Fleet.TP, 1),
			"vllm": rel.Name},
		"workload": string(p.Workload().Resolve().Workload.Kind),
		"arrival":  map[string]any{"process": string(p.Workload().Resolve().Arrival.Process), "rate": p.Arrival.Rate},
		"router":   map[string]any{"metrics_interval": p.Router.MetricsInterval.String(), "network_delay": p.Router.NetworkDelay.String()},
		"requests": p.Requests, "duration": p.Duration.String(),
	}
	if p.Router.Replicas > 1 { // absent for one router, so earlier results keep their bytes
		r := s["router"].(map[string]any)
		r["replicas"], r["assign"], r["event_delay"] = p.Router.Replicas, cmp.Or(p.Router.Assign, cluster.AssignRandom), p.Router.EventDelay.String()
	}
	if st := p.Arrival.Stages; len(st) > 0 {
		a := s["arrival"].(map[string]any)
		a["stages"] = len(st)
		a["drain"] = p.Workload().Resolve().Arrival.Drain == nil || *p.Workload().Resolve().Arrival.Drain
	}
	for _, a := range p.Axes {
		s["axis."+a.Path] = a.Value
	}
	if r := j.replication(); r > 0 {
		s["replication"], s["workload_seed"] = r, p.WorkloadSeedOf(j.rep)
	}
	return s
}

// execute runs one job, streaming its requests as CSV rows to rows (when not nil) and calling
// tick after each finished request.
func execute(ctx context.Context, j job, rows io.Writer, tick func()) (results.Run, error) {
	p := j.point
	// Router replica i seeds its policy with the replication's router seed + i: one router is as before.
	policies := make([]router.Policy, max(p.Router.Replicas, 1))
	for i := range policies {
		var err error
		if policies[i], err = router.Builtin().New(j.policy.Name, j.policy.Params, p.RouterSeedOf(j.rep)+uint64(i)); err != nil {
			return results.Run{}, err
		}
	}
	policy := policies[0]
	opts, err := p.StreamOptions()
	if err != nil {
		return results.Run{}, err
	}
	// Policies that never read prompt text spare the workload generating it.
	opts = append(opts, workloads.WithText(router.ReadsText(policy)))
	stream, err := workloads.Build(p.Workload(), p.WorkloadSeedOf(j.rep), opts...)
	if err != nil {
		return results.Run{}, err
	}
	defer stream.Close()
	cc, err := p.clusterConfig()
	if err != nil {
		return results.Run{}, err
	}
	col := results.NewCollector(results.CollectorOpts{
		Name: j.name, Policy: j.policy.Name, Group: p.Group(), Scenario: j.scenario(),
		RequestRate: p.Arrival.Rate, SLO: p.SLO(), Replication: j.replication(),
	})
	var csv *results.RequestsCSV
	if rows != nil {
		if csv, err = results.NewRequestsCSV(rows); err != nil {
			return results.Run{}, err
		}
	}
	var werr error
	stages := results.NewStageCollector(p.SLO())
	s, err := cluster.NewRouters(cc, policies, stream, cluster.Sink{ITL: col.AddITL, Record: func(r *results.Record) {
		col.Add(r)
		stages.Add(stream.StageAt(r.Arrival), r)
		if csv != nil && werr == nil {
			werr = csv.Write(j.name, r)
		}
		tick()
	}})
	if err != nil {
		return results.Run{}, err
	}
	if err := s.Run(ctx); err != nil {
		return results.Run{}, fmt.Errorf("run %s: %w", j.name, err)
	}
	if csv != nil && werr == nil {
		werr = csv.Flush()
	}
	run := col.Run()
	run.Stages = stageResults(stream.Stages(), stages)
	run.StageMean = results.MeanOverStages(run.Stages)
	return run, werr
}

// stageResults pairs the stream's arrival stages with their metrics (nil without stages).
func stageResults(spans []workloads.StageSpan, c *results.StageCollector) []results.Stage {
	var out []results.Stage
	for i, sp := range spans {
		out = append(out, results.Stage{Index: sp.Index, Rate: sp.Rate, Warmup: sp.Warmup,
			StartS: sp.Start.Seconds(), Metrics: c.Metrics(i)})
	}
	return out
}
