package cluster

import (
	"context"
	"fmt"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"kvroute/results"
	"kvroute/router"
	"kvroute/workloads"
)

// simulateRouters runs w behind cfg.Routers.Count router replicas of policy, the i-th seeded
// seed+i (one router: seed, as simulate has it).
func simulateRouters(t testing.TB, cfg Config, policy string, w workloads.Config, seed uint64, opts ...workloads.Option) outcome {
	t.Helper()
	ps := make([]router.Policy, cfg.Routers.count())
	for i := range ps {
		p, err := router.Builtin().New(policy, nil, seed+uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	stream, err := workloads.Build(w, seed, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	agg := results.NewAggregator()
	var out outcome
	s, err := NewRouters(cfg, ps, stream, Sink{Record: func(r *results.Record) { out.records = append(out.records, *r); agg.Add(r) }, ITL: agg.AddITL})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.metrics, out.sim = agg.Metrics(), s
	return out
}

// Several router replicas: a precise policy, fed every engine's events, routes as well at 8
// routers as at one (within 0.02 of hit rate), while an approximate one, which learns only
// from its own 1/8 of the traffic, loses hits. Runs twice give the same records.
func TestManyRouters(t *testing.T) {
	w := sharedPrefix(16, 600, 8)
	base := Config{Replicas: fleet(4, 1200), Model: model, MetricsInterval: DefaultMetricsInterval}
	hit := map[string]float64{}
	for _, policy := range []string{"precise-prefix", "prefix-score"} {
		for _, n := range []int{1, 8} {
			cfg := base
			cfg.Routers = Routers{Count: n}
			m := simulateRouters(t, cfg, policy, w, 3).metrics
			hit[fmt.Sprint(policy, n)] = m.HitRate
			t.Logf("%-14s routers %d: hit rate %.3f, TTFT p50 %.0f ms p99 %.0f ms", policy, n, m.HitRate, m.TTFT.P50, m.TTFT.P99)
		}
	}
	if d := hit["precise-prefix1"] - hit["precise-prefix8"]; d > 0.02 {
		t.Errorf("precise-prefix: hit rate %.3f at 1 router, %.3f at 8: want within 0.02", hit["precise-prefix1"], hit["precise-prefix8"])
	}
	if d := hit["prefix-score1"] - hit["prefix-score8"]; d < 0.05 {
		t.Errorf("prefix-score: hit rate %.3f at 1 router, %.3f at 8: want a loss, each router sees 1/8 of the traffic", hit["prefix-score1"], hit["prefix-score8"])
	}
	cfg := base
	cfg.Routers = Routers{Count: 3, Assign: AssignAffinity, EventDelay: DefaultMetricsInterval}
	a := simulateRouters(t, cfg, "precise-prefix", sharedPrefix(6, 150, 20), 7)
	b := simulateRouters(t, cfg, "precise-prefix", sharedPrefix(6, 150, 20), 7)
	if diff := gocmp.Diff(a.records, b.records); diff != "" {
		t.Fatalf("two runs with seed 7 differ:\n%s", diff)
	}
}
