package e2e

import (
	"context"
	"math"
	"testing"

	"kvroute/gpumodel"
	"kvroute/internal/loadgen"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// selfWorkload is a small shared-prefix workload: 4 groups of 1,024-token system prompts.
func selfWorkload() workloads.Config {
	repeat := true
	return workloads.Config{
		Workload: workloads.WorkloadConfig{
			Kind: workloads.KindSharedPrefix, Groups: 4, PromptsPerGroup: 8, SystemPromptTokens: 1024,
			QuestionTokens: 64, OutputTokens: 32, Repeat: &repeat,
		},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: 8},
		Requests: 48,
	}
}

// TestLiveAgreesWithSimulation is the self-consistency check: the same workload, seed, fleet
// and policy, once through emulated replicas behind the real router (driven by the load
// generator in real time) and once through the simulator. Tolerances: hit rate within 0.05;
// mean TTFT within 50% plus 5 ms: the emulator now reads the workload's synthetic words back
// as the workload's own token ids (plus one separator token per chat message), so live and
// simulated prompts are the same length, but live TTFT also pays for two HTTP hops, which
// under -race on a busy 2-core machine cost milliseconds.
func TestLiveAgreesWithSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 6 s of real time")
	}
	const seed = 5
	s := start(t, 2, "prefix-score", 1)
	stream, err := workloads.Build(selfWorkload(), seed)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	live := results.NewAggregator()
	opts := loadgen.DefaultOptions()
	opts.Target, opts.Model = s.url, model
	if _, err := loadgen.Run(context.Background(), opts, stream, loadgen.Sink{Result: func(r *loadgen.Result) {
		live.Add(&r.Record)
		if r.Record.Endpoint == "" || r.Record.Reason != router.ReasonMaxScore {
			t.Errorf("%s: endpoint %q reason %q: the router's headers did not reach the record", r.Record.ID, r.Record.Endpoint, r.Record.Reason)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	sim := simulateSelf(t, seed)
	lm, sm := live.Metrics(), sim.Metrics()
	t.Logf("live: %d/%d completed, hit %.3f, TTFT mean %.1f ms p50 %.1f; sim: %d/%d, hit %.3f, TTFT mean %.1f ms p50 %.1f",
		lm.Completed, lm.Requests, lm.HitRate, lm.TTFT.Mean, lm.TTFT.P50, sm.Completed, sm.Requests, sm.HitRate, sm.TTFT.Mean, sm.TTFT.P50)
	if lm.Completed != 48 || sm.Completed != 48 {
		t.Fatalf("completed: live %d, sim %d, want 48", lm.Completed, sm.Completed)
	}
	if d := math.Abs(lm.HitRate - sm.HitRate); d > 0.05 {
		t.Errorf("hit rate: live %.3f, sim %.3f (|diff| %.3f > 0.05)", lm.HitRate, sm.HitRate, d)
	}
	if d := math.Abs(lm.TTFT.Mean - sm.TTFT.Mean); d > 0.5*sm.TTFT.Mean+5 {
		t.Errorf("mean TTFT: live %.1f ms, sim %.1f ms (|diff| %.1f ms > 50%% + 5 ms)", lm.TTFT.Mean, sm.TTFT.Mean, d)
	}
}

func simulateSelf(t *testing.T, seed uint64) *results.Aggregator {
	t.Helper()
	return simulateWith(t, "prefix-score", seed)
}

// simulateWith runs selfWorkload through the simulator: two H100 replicas behind policy.
func simulateWith(t *testing.T, policy string, seed uint64) *results.Aggregator {
	t.Helper()
	p, err := router.Builtin().New(policy, nil, seed)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := workloads.Build(selfWorkload(), seed)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	agg := results.NewAggregator()
	c, err := cluster.New(cluster.Config{
		Replicas: []engine.Config{{Deployment: d}, {Deployment: d}}, Model: model, MetricsInterval: cluster.DefaultMetricsInterval,
	}, p, stream, cluster.Sink{Record: agg.Add, ITL: agg.AddITL})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return agg
}
