package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"kvroute/results"
	"kvroute/router"
	"kvroute/workloads"
)

// BenchmarkSimulate runs an 8-replica H100 Llama-3.1-8B fleet on ShareGPT-like traffic and
// reports simulated requests per wall-clock second and simulated seconds per wall-clock
// second. Workloads: single-turn (synthetic-chat cut to one turn: ShareGPT's message-length
// distributions, as `vllm bench serve` samples the dataset) at 40 and 100 requests/s, and
// multi-turn (whole synthetic-chat conversations, each turn re-sending the history; 40 new
// sessions/s, ~104 requests/s); policies: round-robin (the simulator's own cost) and
// prefix-score (GIE's index in the loop). Requests/s and sim-s/wall-s are tied by the load:
// their ratio is the simulated request rate.
func BenchmarkSimulate(b *testing.B) {
	for _, wl := range []struct {
		name  string
		turns int
		rate  float64
	}{{"single-turn/40rps", 1, 40}, {"single-turn/100rps", 1, 100}, {"multi-turn/40sps", 0, 40}} {
		for _, policy := range []string{"round-robin", "prefix-score"} {
			b.Run(fmt.Sprintf("%s/%s", wl.name, policy), func(b *testing.B) {
				w := workloads.Config{
					Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat, MeanTurns: float64(wl.turns), MaxTurns: wl.turns},
					Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: wl.rate},
					Requests: 20000,
				}
				benchSimulate(b, w, policy)
			})
		}
	}
}

func benchSimulate(b *testing.B, w workloads.Config, policy string) {
	b.ReportAllocs()
	var simulated time.Duration
	for b.Loop() {
		agg := results.NewAggregator()
		s := runFleet(b, w, policy, 8, Sink{Record: agg.Add, ITL: agg.AddITL})
		if m := agg.Metrics(); m.Completed != w.Requests {
			b.Fatalf("completed %d of %d", m.Completed, w.Requests)
		}
		simulated += s.Now().Duration()
	}
	wall := b.Elapsed().Seconds()
	b.ReportMetric(float64(w.Requests*b.N)/wall, "requests/s")
	b.ReportMetric(simulated.Seconds()/wall, "sim-s/wall-s")
}

// runFleet simulates w (seed 1, built as policy reads it) through n H100 replicas routed by
// policy, sending results to sink, and returns the simulation once it has run.
func runFleet(tb testing.TB, w workloads.Config, policy string, n int, sink Sink) *Sim {
	p, err := router.Builtin().New(policy, nil, 1)
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := workloads.Build(w, 1, workloads.WithText(router.ReadsText(p)))
	if err != nil {
		tb.Fatal(err)
	}
	defer stream.Close()
	s, err := New(Config{Replicas: fleet(n, 0), Model: model, MetricsInterval: DefaultMetricsInterval}, p, stream, sink)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}
