package cluster

import (
	"context"
	"testing"
	"time"

	"kvroute/results"
	"kvroute/router"
	"kvroute/workloads"
)

// BenchmarkSimulate runs an 8-replica H100 Llama-3.1-8B fleet on ShareGPT-like multi-turn
// traffic (synthetic-chat) routed by prefix-score, and reports simulated requests per
// wall-clock second and simulated seconds per wall-clock second.
func BenchmarkSimulate(b *testing.B) {
	const requests = 20000
	w := workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: 40},
		Requests: requests,
	}
	b.ReportAllocs()
	var simulated time.Duration
	for b.Loop() {
		p, err := router.Builtin().New("prefix-score", nil, 1)
		if err != nil {
			b.Fatal(err)
		}
		stream, err := workloads.Build(w, 1)
		if err != nil {
			b.Fatal(err)
		}
		agg := results.NewAggregator()
		s, err := New(Config{Replicas: fleet(8, 0), Model: model, MetricsInterval: DefaultMetricsInterval}, p, stream,
			Sink{Record: agg.Add, ITL: agg.AddITL})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		stream.Close()
		if m := agg.Metrics(); m.Completed != requests {
			b.Fatalf("completed %d of %d", m.Completed, requests)
		}
		simulated += s.Now().Duration()
	}
	wall := b.Elapsed().Seconds()
	b.ReportMetric(float64(requests*b.N)/wall, "requests/s")
	b.ReportMetric(simulated.Seconds()/wall, "sim-s/wall-s")
}
