package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"kvroute/results"
	"kvroute/router"
	"kvroute/router/tokenize"
	"kvroute/sim"
	"kvroute/sim/cluster"
	"kvroute/workloads"
)

// job is one run of a sweep: a point with one policy.
type job struct {
	index  int
	name   string
	point  Point
	policy PolicySpec
}

// plan lists the runs of the points, policies inner, in a fixed order.
func plan(points []Point) []job {
	var jobs []job
	for _, p := range points {
		for _, ps := range p.Policies {
			name := ps.Label()
			if l := p.Label(); l != "base" {
				name += "/" + l
			}
			jobs = append(jobs, job{index: len(jobs), name: name, point: p, policy: ps})
		}
	}
	return jobs
}

func (p Point) slo() results.SLO {
	return results.SLO{TTFTMs: p.SLO.TTFTMs, TPOTMs: p.SLO.TPOTMs, E2EMs: p.SLO.E2EMs}
}

// group names the runs plotted together: the point without its arrival rate.
func (p Point) group() string {
	var parts []string
	for _, a := range p.Axes {
		if a.Path != "arrival.rate" {
			parts = append(parts, a.Path[strings.LastIndexByte(a.Path, '.')+1:]+"="+a.Value)
		}
	}
	if len(parts) == 0 {
		return p.Name
	}
	return p.Name + " " + strings.Join(parts, ",")
}

// scenario is what summary.json records about a run's setting.
func (j job) scenario() map[string]any {
	p := j.point
	s := map[string]any{
		"name": p.Name, "seed": p.Seed, "policy_params": j.policy.Params,
		"fleet":    map[string]any{"replicas": p.Fleet.Replicas, "gpu": p.Fleet.GPU, "model": p.Fleet.Model, "tp": max(p.Fleet.TP, 1)},
		"workload": string(p.workload().Resolve().Workload.Kind),
		"arrival":  map[string]any{"process": string(p.workload().Resolve().Arrival.Process), "rate": p.Arrival.Rate},
		"router":   map[string]any{"metrics_interval": p.Router.MetricsInterval.String(), "network_delay": p.Router.NetworkDelay.String()},
		"requests": p.Requests, "duration": p.Duration.String(),
	}
	for _, a := range p.Axes {
		s["axis."+a.Path] = a.Value
	}
	return s
}

// seeds derives the run's workload and router seeds from the file's seed: every policy of a
// point sees the same traffic.
func (p Point) seeds() (workload, routing uint64) {
	return sim.SubSeed(p.Seed, "workload"), sim.SubSeed(p.Seed, "router")
}

// execute runs one job, streaming its requests as CSV rows to rows (when not nil) and calling
// tick after each finished request.
func execute(ctx context.Context, j job, rows io.Writer, tick func()) (results.Run, error) {
	p := j.point
	wseed, rseed := p.seeds()
	policy, err := router.Builtin().New(j.policy.Name, j.policy.Params, rseed)
	if err != nil {
		return results.Run{}, err
	}
	opts := []workloads.Option{}
	if usesDataset(p.Workload) {
		tok, err := tokenize.NewTiktoken()
		if err != nil {
			return results.Run{}, err
		}
		opts = append(opts, workloads.WithTokenizer(tiktokenIDs{tok}))
	}
	stream, err := workloads.Build(p.workload(), wseed, opts...)
	if err != nil {
		return results.Run{}, err
	}
	defer stream.Close()
	cc, err := p.clusterConfig()
	if err != nil {
		return results.Run{}, err
	}
	col := results.NewCollector(results.CollectorOpts{
		Name: j.name, Policy: j.policy.Name, Group: p.group(), Scenario: j.scenario(),
		RequestRate: p.Arrival.Rate, SLO: p.slo(),
	})
	var csv *results.RequestsCSV
	if rows != nil {
		if csv, err = results.NewRequestsCSV(rows); err != nil {
			return results.Run{}, err
		}
	}
	var werr error
	s, err := cluster.New(cc, policy, stream, cluster.Sink{ITL: col.AddITL, Record: func(r *results.Record) {
		col.Add(r)
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
	return col.Run(), werr
}

// usesDataset reports whether the workload reads text that needs the real tokenizer.
func usesDataset(w workloads.WorkloadConfig) bool {
	if w.Kind == workloads.KindShareGPT {
		return true
	}
	for _, t := range w.Tenants {
		if t.Workload.Kind == workloads.KindShareGPT {
			return true
		}
	}
	return false
}

// tiktokenIDs adapts the project's tiktoken to workloads.Tokenizer.
type tiktokenIDs struct{ t *tokenize.Tiktoken }

func (t tiktokenIDs) Encode(text string) []int32 {
	ids := t.t.Encode(text)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// rateLabel formats a request rate for logs.
func rateLabel(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }
