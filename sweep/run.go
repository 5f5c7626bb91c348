package sweep

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"kvroute/results"
	"kvroute/sim/cluster"
	"kvroute/workloads"
)

// Job is one run of a sweep: a point with one policy, in one replication (0-based Rep).
type Job struct {
	Index  int    // its place in Plan's order
	Name   string // the run's name in the results
	Point  Point
	Policy PolicySpec
	Rep    int
	// PDColumns says the sweep has a split fleet: its requests.csv carries the P/D columns.
	PDColumns bool
}

// Plan lists the runs of the points, replications, then policies inner, in a fixed order.
// With several replications a run's name ends in its replication number (results.RepName).
func Plan(points []Point) []Job {
	var jobs []Job
	pd := false
	for _, p := range points {
		pd = pd || p.Fleet.Disaggregated()
	}
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
				jobs = append(jobs, Job{Index: len(jobs), Name: name, Point: p, Policy: ps, Rep: rep, PDColumns: pd})
			}
		}
	}
	return jobs
}

// replication is the run's 1-based replication number, 0 without replications.
func (j Job) replication() int {
	if j.Point.Reps() > 1 {
		return j.Rep + 1
	}
	return 0
}

// scenario is what summary.json records about a run's setting.
func (j Job) scenario() map[string]any {
	p := j.Point
	rel, _ := p.release() // validated before the run
	s := map[string]any{
		"name": p.Name, "seed": p.Seed, "policy_params": j.Policy.Params,
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
	if p.Fleet.Split != "" || len(p.Fleet.Pools) > 0 { // absent otherwise, so earlier results keep their bytes
		s["fleet_split"] = p.Fleet.SplitLabel()
	}
	if r := j.replication(); r > 0 {
		s["replication"], s["workload_seed"] = r, p.WorkloadSeedOf(j.Rep)
	}
	return s
}

// Execute runs the job's simulation, streaming its requests as CSV rows to rows (when not nil) and calling
// tick after each finished request.
func (j Job) Execute(ctx context.Context, rows io.Writer, tick func()) (results.Run, error) {
	p := j.Point
	cc, err := p.clusterConfig()
	if err != nil {
		return results.Run{}, err
	}
	rs, err := j.routers(len(cc.Roles) > 0)
	if err != nil {
		return results.Run{}, err
	}
	opts, err := p.StreamOptions()
	if err != nil {
		return results.Run{}, err
	}
	// Policies that never read prompt text spare the workload generating it.
	opts = append(opts, workloads.WithText(rs.readsText()))
	stream, err := workloads.Build(p.Workload(), p.WorkloadSeedOf(j.Rep), opts...)
	if err != nil {
		return results.Run{}, err
	}
	defer stream.Close()
	col := results.NewCollector(results.CollectorOpts{
		Name: j.Name, Policy: j.Policy.Name, Group: p.Group(), Scenario: j.scenario(),
		RequestRate: p.Arrival.Rate, SLO: p.SLO(), Replication: j.replication(),
	})
	var csv *results.RequestsCSV
	if rows != nil {
		if csv, err = results.NewRequestsCSVOpts(rows, results.RequestsCSVOpts{PD: j.PDColumns}); err != nil {
			return results.Run{}, err
		}
	}
	var werr error
	stages := results.NewStageCollector(p.SLO())
	s, err := rs.sim(cc, stream, cluster.Sink{ITL: col.AddITL, Record: func(r *results.Record) {
		col.Add(r)
		stages.Add(stream.StageAt(r.Arrival), r)
		if csv != nil && werr == nil {
			werr = csv.Write(j.Name, r)
		}
		tick()
	}})
	if err != nil {
		return results.Run{}, err
	}
	if err := s.Run(ctx); err != nil {
		return results.Run{}, fmt.Errorf("run %s: %w", j.Name, err)
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

// ResolvedConfig is config.yaml: every point with its defaults filled in and its seeds.
func ResolvedConfig(points []Point) ([]byte, error) {
	type resolved struct {
		Point        string           `yaml:"point"`
		WorkloadSeed uint64           `yaml:"workload_seed"`
		RouterSeed   uint64           `yaml:"router_seed"`
		File         File             `yaml:",inline"`
		Resolved     workloads.Config `yaml:"resolved_workload"`

		// RepSeeds are the workload and router seeds of replications 2..N.
		RepSeeds [][2]uint64 `yaml:"replication_seeds,omitempty"`
	}
	var doc []resolved
	for _, p := range points {
		r := resolved{Point: p.Label(), WorkloadSeed: p.WorkloadSeed(), RouterSeed: p.RouterSeed(), File: p.File, Resolved: p.Workload().Resolve()}
		for rep := 1; rep < p.Reps(); rep++ {
			r.RepSeeds = append(r.RepSeeds, [2]uint64{p.WorkloadSeedOf(rep), p.RouterSeedOf(rep)})
		}
		doc = append(doc, r)
	}
	return yaml.Marshal(map[string]any{"points": doc})
}
