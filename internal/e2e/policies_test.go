package e2e

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvroute/router"
	"kvroute/workloads"
)

// pressureWorkload is a shared-prefix workload whose prefixes do not all fit in one small
// replica: 6 groups of 1,024-token system prompts (64 blocks each, 384 in all) against
// pressureBlocks per replica, so a policy that spreads every group over every replica evicts
// prefixes, and one that keeps each group on one replica does not.
func pressureWorkload() workloads.Config {
	repeat := true
	return workloads.Config{
		Workload: workloads.WorkloadConfig{
			Kind: workloads.KindSharedPrefix, Groups: 6, PromptsPerGroup: 8, SystemPromptTokens: 1024,
			QuestionTokens: 64, OutputTokens: 32, Repeat: &repeat,
		},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: 20},
		Requests: 300,
	}
}

// pressureBlocks is each replica's KV capacity in blocks (4,096 tokens): two or three groups'
// prefixes and the requests in flight.
const pressureBlocks = 256

// TestEveryPolicyLiveAgainstSimulation is a measurement (set KVROUTE_LIVE_POLICIES=1; about
// 20 s a policy, KVROUTE_LIVE_POLICIES=prefix-score,chwbl runs only those): for every built-in
// policy, pressureWorkload through three emulated replicas with pressureBlocks each behind the
// router, and through the simulator. It logs a markdown table (hit rate: simulated, simulated
// with a 1 ms one-way router↔replica delay, about a loopback HTTP hop, and live; the largest
// difference of a replica's share of the requests; TTFT p50 and p99: simulated, live on the
// client's clock, live on the engine's clock) and fails a policy whose hit rate differs by more than 0.05 or
// whose shares differ by more than 0.1.
func TestEveryPolicyLiveAgainstSimulation(t *testing.T) {
	only := os.Getenv("KVROUTE_LIVE_POLICIES")
	if only == "" {
		t.Skip("a measurement: set KVROUTE_LIVE_POLICIES=1")
	}
	names := router.Builtin().Names()
	if only != "1" {
		names = strings.Split(only, ",")
	}
	rows := []string{
		"| policy | hit sim | hit sim +1 ms | hit live | max share diff | TTFT p50 sim / live / live engine (ms) | TTFT p99 sim / live / live engine (ms) |",
		"|---|---|---|---|---|---|---|",
	}
	if seeds, _ := strconv.Atoi(os.Getenv("KVROUTE_LIVE_SEEDS")); seeds > 1 {
		everyPolicyOverSeeds(t, names, seeds)
		return
	}
	for _, policy := range names {
		a := agreeSetup{Policy: policy, Replicas: 3, NumBlocks: pressureBlocks, Workload: pressureWorkload(), Seed: 5}
		sim, live := a.simulate(t), a.live(t)
		a.NetworkDelay = time.Millisecond
		delayed := a.simulate(t)
		dHit, dShare := math.Abs(live.Metrics.HitRate-sim.Metrics.HitRate), maxShareDiff(live.Share, sim.Share)
		row := fmtRow(policy, sim, delayed, live, dShare)
		rows = append(rows, row)
		t.Logf("%s\n  sim shares:%s\n  sim +1 ms shares:%s\n  live shares:%s\n  completed sim %d live %d of %d; prompt tokens sim %d live %d",
			row, shares(sim.Share), shares(delayed.Share), shares(live.Share), sim.Metrics.Completed, live.Metrics.Completed,
			sim.Metrics.Requests, sim.Prompt, live.Prompt)
		if dHit > 0.05 || dShare > 0.1 {
			t.Errorf("%s: hit rate sim %.3f live %.3f (|diff| %.3f, target 0.05); max share diff %.3f (target 0.1)",
				policy, sim.Metrics.HitRate, live.Metrics.HitRate, dHit, dShare)
		}
	}
	t.Logf("\n%s", strings.Join(rows, "\n"))
}

// everyPolicyOverSeeds is the measurement over workload seeds 1..seeds (KVROUTE_LIVE_SEEDS),
// for policies whose single runs hinge on sub-millisecond timing (lmetric: whether a group's
// next request finds its replica's pending sum already released decides which replica holds
// the group for the rest of the run, so two live runs of one seed differ as much as live and
// simulated). It compares the means over the seeds of the hit rate and of the shares sorted
// from the busiest replica down (which replica is busiest is itself one of those races).
func everyPolicyOverSeeds(t *testing.T, names []string, seeds int) {
	rows := []string{
		"| policy | seeds | hit sim | hit live | sorted shares sim | sorted shares live |",
		"|---|---|---|---|---|---|",
	}
	for _, policy := range names {
		var hitSim, hitLive float64
		shareSim, shareLive := make([]float64, 3), make([]float64, 3)
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			a := agreeSetup{Policy: policy, Replicas: 3, NumBlocks: pressureBlocks, Workload: pressureWorkload(), Seed: seed}
			sim, live := a.simulate(t), a.live(t)
			hitSim, hitLive = hitSim+sim.Metrics.HitRate/float64(seeds), hitLive+live.Metrics.HitRate/float64(seeds)
			addSorted(shareSim, sim.Share, seeds)
			addSorted(shareLive, live.Share, seeds)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %.3f | %.3f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |", policy, seeds,
			hitSim, hitLive, shareSim[0], shareSim[1], shareSim[2], shareLive[0], shareLive[1], shareLive[2]))
		dShare := 0.0
		for i := range shareSim {
			dShare = max(dShare, math.Abs(shareSim[i]-shareLive[i]))
		}
		if d := math.Abs(hitSim - hitLive); d > 0.05 || dShare > 0.1 {
			t.Errorf("%s over %d seeds: mean hit rate sim %.3f live %.3f (|diff| %.3f, target 0.05); sorted shares differ by %.3f (target 0.1)",
				policy, seeds, hitSim, hitLive, d, dShare)
		}
	}
	t.Logf("\n%s", strings.Join(rows, "\n"))
}

// addSorted adds share's values, busiest first, each divided by n, to acc.
func addSorted(acc []float64, share map[string]float64, n int) {
	v := make([]float64, 0, len(share))
	for _, s := range share {
		v = append(v, s)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(v)))
	for i := range min(len(acc), len(v)) {
		acc[i] += v[i] / float64(n)
	}
}

// fmtRow is one policy's row of the table.
func fmtRow(policy string, sim, delayed, live agreeRun, dShare float64) string {
	return fmt.Sprintf("| %s | %.3f | %.3f | %.3f | %.3f | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f |", policy,
		sim.Metrics.HitRate, delayed.Metrics.HitRate, live.Metrics.HitRate, dShare,
		sim.Metrics.TTFT.P50, live.Metrics.TTFT.P50, quantileMs(live.EngineTTFT, 0.5),
		sim.Metrics.TTFT.P99, live.Metrics.TTFT.P99, quantileMs(live.EngineTTFT, 0.99))
}
