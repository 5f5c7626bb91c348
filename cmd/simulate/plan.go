package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"kvroute/sweep"
)

// Probe sizes: the probe simulates probeFraction of the representative run's requests, at
// least probeMinRequests (all of them when it has fewer).
const (
	probeFraction    = 0.05
	probeMinRequests = 500
)

// runCost is a run's estimated size in requests.
type runCost struct {
	job      sweep.Job
	requests float64
	counted  bool // false: estimated from rate × duration, with no requests: cap
}

// planEstimate is what -plan prints.
type planEstimate struct {
	runs        []runCost
	probe       sweep.Job
	probeReqs   int           // requests the probe simulated
	probeCPU    time.Duration // its CPU time
	perRequest  time.Duration // CPU time per simulated request
	totalCPU    time.Duration
	longest     time.Duration // the costliest run's CPU time
	shards      int           // 0: no shard count finishes within the wall time
	shardWall   time.Duration // the slowest shard's estimated wall time with shards
	uncountable int           // runs whose size rate × duration estimates
}

// runPlan is simulate -plan: it probes one representative run and prints the sweep's size,
// its estimated CPU time and the shard count that finishes within -plan-wall.
func runPlan(ctx context.Context, points []sweep.Point, o options, stdout io.Writer, log *slog.Logger) int {
	if o.planWall <= 0 {
		log.Error("plan: -plan-wall must be positive", "got", o.planWall)
		return 2
	}
	est, err := estimatePlan(ctx, sweep.Plan(points), o.parallel, o.planWall)
	if err != nil {
		log.Error("plan: the probe run failed", "err", err)
		return 1
	}
	est.print(stdout, o.parallel, o.planWall)
	return 0
}

// estimatePlan sizes every run, probes the median-sized one and scales its CPU time per
// request to the plan.
func estimatePlan(ctx context.Context, plan []sweep.Job, parallel int, wall time.Duration) (planEstimate, error) {
	est := planEstimate{runs: make([]runCost, len(plan))}
	for i, j := range plan {
		est.runs[i] = costOf(j)
		if !est.runs[i].counted {
			est.uncountable++
		}
	}
	if len(plan) == 0 {
		return est, nil
	}
	if err := est.runProbe(ctx, probeJob(est.runs)); err != nil {
		return est, err
	}
	costs := make([]time.Duration, len(plan))
	for i, r := range est.runs {
		costs[i] = time.Duration(r.requests * float64(est.perRequest))
		est.totalCPU += costs[i]
		est.longest = max(est.longest, costs[i])
	}
	est.shards, est.shardWall = shardsWithin(costs, max(parallel, 1), wall)
	return est, nil
}

// costOf sizes a run: its requests: cap, or else its sessions' rate × duration (stage by
// stage with arrival stages), which counts sessions, not their later turns.
func costOf(j sweep.Job) runCost {
	p := j.Point
	if p.Requests > 0 {
		return runCost{job: j, requests: float64(p.Requests), counted: true}
	}
	n := p.Arrival.Rate * p.Duration.Seconds()
	if st := p.Arrival.Stages; len(st) > 0 {
		n = 0
		for _, s := range st {
			n += s.Rate * s.Duration.Seconds()
		}
	}
	return runCost{job: j, requests: max(n, 1)}
}

// probeRepeats is how many times the probe is measured: the least CPU time is the one
// least disturbed by other work on the machine.
const probeRepeats = 3

// runProbe simulates the probe run after a tenth of it has warmed the process (code,
// tokenizer, heap), probeRepeats times, each after a collection so that none pays for
// garbage of the one before, and keeps the least CPU time per request.
func (e *planEstimate) runProbe(ctx context.Context, probe sweep.Job) error {
	measure := func(n int) (int, time.Duration, error) {
		j := probe
		j.Point.Requests = max(n, 1)
		runtime.GC()
		cpu0 := processCPU()
		run, err := j.Execute(ctx, nil, func() {})
		return max(run.Metrics.Requests, 1), processCPU() - cpu0, err
	}
	if _, _, err := measure(probe.Point.Requests / 10); err != nil {
		return err
	}
	for i := range probeRepeats {
		n, c, err := measure(probe.Point.Requests)
		if err != nil {
			return err
		}
		if per := c / time.Duration(n); i == 0 || per < e.perRequest {
			e.probe, e.probeReqs, e.probeCPU, e.perRequest = probe, n, c, per
		}
	}
	return nil
}

// probeJob returns the run of median size, cut to probeFraction of its requests.
func probeJob(runs []runCost) sweep.Job {
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(runs[a].requests, runs[b].requests)
	})
	r := runs[order[len(order)/2]]
	n := min(max(int(r.requests*probeFraction), probeMinRequests), int(r.requests))
	j := r.job
	j.Point.Requests = max(n, 1)
	return j
}

// shardsWithin returns the smallest shard count whose slowest shard finishes within wall,
// and that shard's wall time: runs are dealt to shards as -shard deals them, and a shard
// runs parallel of them at once, so it takes at least its CPU time / parallel and at least
// its longest run. It returns 0 when even one run per shard takes longer than wall.
func shardsWithin(costs []time.Duration, parallel int, wall time.Duration) (int, time.Duration) {
	if wall <= 0 {
		return 0, 0
	}
	var total time.Duration
	for _, c := range costs {
		total += c
	}
	// No fewer shards than the CPU time needs at full use of every shard's parallel runs.
	first := int(total / (wall * time.Duration(parallel)))
	for n := max(min(first, len(costs)), 1); n <= len(costs); n++ {
		var slowest time.Duration
		for i := range n {
			var sum, longest time.Duration
			for _, p := range (sweep.Shard{Index: i, Count: n}).Positions(len(costs)) {
				sum += costs[p]
				longest = max(longest, costs[p])
			}
			slowest = max(slowest, sum/time.Duration(parallel), longest)
		}
		if slowest <= wall {
			return n, slowest
		}
	}
	return 0, 0
}

func (e planEstimate) print(w io.Writer, parallel int, wall time.Duration) {
	var reqs float64
	for _, r := range e.runs {
		reqs += r.requests
	}
	fmt.Fprintf(w, "runs: %d (%.0f requests in all)\n", len(e.runs), reqs)
	if len(e.runs) == 0 {
		return
	}
	fmt.Fprintf(w, "probe: %d requests of run %q took %v of CPU (%v per request)\n",
		e.probeReqs, e.probe.Name, e.probeCPU.Round(time.Millisecond), e.perRequest.Round(time.Microsecond))
	fmt.Fprintf(w, "estimated CPU time: %v in all, %v for the longest run\n", round(e.totalCPU), round(e.longest))
	if e.shards == 0 {
		fmt.Fprintf(w, "shards: none finishes within %v: the longest run alone takes about %v\n", wall, round(e.longest))
	} else {
		fmt.Fprintf(w, "shards: %d finish within %v, with -parallel %d in each (the slowest in about %v): -shard i/%d\n",
			e.shards, wall, parallel, round(e.shardWall), e.shards)
	}
	fmt.Fprintln(w, "note: the estimate is from a probe on this machine; scale it by the speed of the machines that run the shards.")
	if e.probeReqs < e.probe.Point.Requests {
		fmt.Fprintf(w, "note: the probe run's workload ended after %d of the %d requests it was allowed: runs may be smaller than their requests: cap.\n",
			e.probeReqs, e.probe.Point.Requests)
	}
	if e.uncountable > 0 {
		fmt.Fprintf(w, "note: %d runs have no requests: cap; their size counts rate × duration sessions, not the turns after the first.\n", e.uncountable)
	}
}

// round rounds a duration to a precision that suits its size.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(10 * time.Millisecond)
	}
}
