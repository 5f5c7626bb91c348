package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

const model = "llama-3.1-8b"

func fleet(n, blocks int) []engine.Config {
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	out := make([]engine.Config, n)
	for i := range out {
		out[i] = engine.Config{Deployment: d, NumBlocks: blocks}
	}
	return out
}

func sharedPrefix(groups, requests int, rate float64) workloads.Config {
	repeat := true
	return workloads.Config{
		Workload: workloads.WorkloadConfig{
			Kind: workloads.KindSharedPrefix, Groups: groups, PromptsPerGroup: 8, SystemPromptTokens: 2048,
			QuestionTokens: 64, OutputTokens: 32, Repeat: &repeat,
		},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: rate},
		Requests: requests,
	}
}

type outcome struct {
	records []results.Record
	metrics results.Metrics
	sim     *Sim
}

func simulate(t *testing.T, cfg Config, policy string, w workloads.Config, seed uint64, opts ...workloads.Option) outcome {
	t.Helper()
	return simulateRouters(t, cfg, policy, w, seed, opts...)
}

// TestEveryRequestEndsOnceDespiteFailures fails two replicas under load: every request ends
// in exactly one record, re-routed up to MaxRetries times (0: never, as in cmd/route), and
// the in-flight counts return to zero.
func TestEveryRequestEndsOnceDespiteFailures(t *testing.T) {
	for _, maxRetries := range []int{0, DefaultMaxRetries} {
		t.Run(fmt.Sprintf("max_retries=%d", maxRetries), func(t *testing.T) {
			cfg := Config{
				Replicas: fleet(4, 2000), Model: model, MetricsInterval: DefaultMetricsInterval, NetworkDelay: time.Millisecond,
				MaxRetries: maxRetries,
				Failures:   []Failure{{Replica: 1, At: 3 * time.Second, RecoverAt: 8 * time.Second}, {Replica: 2, At: 5 * time.Second}},
			}
			o := simulate(t, cfg, "prefix-cache", sharedPrefix(8, 300, 30), 1)
			seen := map[string]int{}
			retried, failed := 0, 0
			for _, r := range o.records {
				seen[r.ID]++
				retried += r.Retries
				if r.Retries > maxRetries {
					t.Fatalf("%s: retried %d times, max_retries %d", r.ID, r.Retries, maxRetries)
				}
				if r.Status == results.StatusFailed {
					failed++
				}
				if r.Status == results.StatusCompleted && (r.FirstToken <= r.Arrival || r.Finish < r.FirstToken) {
					t.Fatalf("%s: arrival %v first token %v finish %v", r.ID, r.Arrival, r.FirstToken, r.Finish)
				}
			}
			if len(seen) != 300 || len(o.records) != 300 {
				t.Fatalf("%d records for %d distinct requests, want 300 and 300", len(o.records), len(seen))
			}
			if (retried > 0) != (maxRetries > 0) || (maxRetries == 0 && failed == 0) {
				t.Fatalf("max_retries %d: %d retries, %d failed requests", maxRetries, retried, failed)
			}
			for i, e := range o.sim.Endpoints() {
				if e.InFlight != 0 || e.InFlightTokens != 0 {
					t.Fatalf("endpoint %d: in-flight %d/%d after the run", i, e.InFlight, e.InFlightTokens)
				}
			}
			if !o.sim.Endpoints()[1].Ready || o.sim.Endpoints()[2].Ready {
				t.Fatal("replica 1 should be back, replica 2 still down")
			}
		})
	}
}

func TestSameSeedSameRecords(t *testing.T) {
	cfg := Config{Replicas: fleet(3, 3000), Model: model, MetricsInterval: DefaultMetricsInterval}
	for _, policy := range []string{"prefix-score", "vtc-basic", "power-of-two"} {
		a := simulate(t, cfg, policy, sharedPrefix(6, 150, 20), 7)
		b := simulate(t, cfg, policy, sharedPrefix(6, 150, 20), 7)
		if diff := gocmp.Diff(a.records, b.records); diff != "" {
			t.Fatalf("%s: two runs with seed 7 differ:\n%s", policy, diff)
		}
	}
}

// On shared-prefix traffic whose groups do not all fit in one replica's KV cache, round-robin
// spreads every group over every replica and thrashes; a prefix-aware router keeps groups
// apart and hits.
func TestPrefixAwareBeatsRoundRobinUnderKVPressure(t *testing.T) {
	cfg := Config{Replicas: fleet(4, 1200), Model: model, MetricsInterval: DefaultMetricsInterval}
	w := sharedPrefix(16, 600, 8) // 16 groups × 128 blocks: 2,048 blocks against 1,200 per replica
	rr := simulate(t, cfg, "round-robin", w, 3).metrics
	for _, policy := range []string{"prefix-cache", "prefix-score", "cache-aware", "prefix-tree", "precise-prefix"} {
		m := simulate(t, cfg, policy, w, 3).metrics
		t.Logf("%-13s hit rate %.2f (round-robin %.2f), TTFT p50 %.0f ms (round-robin %.0f)", policy, m.HitRate, rr.HitRate, m.TTFT.P50, rr.TTFT.P50)
		if m.HitRate < rr.HitRate+0.3 {
			t.Errorf("%s: hit rate %.2f, round-robin %.2f: want a wide margin", policy, m.HitRate, rr.HitRate)
		}
	}
}

// With a scrape interval far longer than the gap between requests, a policy that reads only
// scraped load sends every request of an interval to the same replica: it herds. Herding is
// measured as the fraction of requests routed to the same replica as the request before.
// least-request, which also counts the router's own exact in-flight requests, does not.
func TestStaleMetricsMakeLoadOnlyPoliciesHerd(t *testing.T) {
	herding := func(policy string, interval time.Duration) float64 {
		cfg := Config{Replicas: fleet(8, 4000), Model: model, MetricsInterval: interval}
		w := sharedPrefix(64, 1500, 40)
		w.Workload.OutputTokens = 400 // long decodes keep every replica's KV busy and distinct
		o := simulate(t, cfg, policy, w, 5)
		recs := append([]results.Record(nil), o.records...)
		slices.SortFunc(recs, func(a, b results.Record) int { return cmp.Compare(a.Arrival, b.Arrival) })
		same := 0
		for i := 1; i < len(recs); i++ {
			if recs[i].Endpoint == recs[i-1].Endpoint {
				same++
			}
		}
		return float64(same) / float64(len(recs)-1)
	}
	fresh, stale := herding("least-kv-cache", 0), herding("least-kv-cache", time.Second)
	exact := herding("least-request", time.Second)
	t.Logf("consecutive requests on the same replica: least-kv-cache fresh %.2f, 1 s stale %.2f; least-request 1 s stale %.2f", fresh, stale, exact)
	if stale < 0.8 || stale < fresh+0.15 || exact > 0.35 {
		t.Fatalf("least-kv-cache fresh %.2f, stale %.2f (want > 0.8 and well above fresh); least-request stale %.2f (want < 0.35)", fresh, stale, exact)
	}
}

func ExampleSim() {
	p, _ := router.Builtin().New("prefix-score", nil, 1)
	w := sharedPrefix(4, 40, 10)
	stream, _ := workloads.Build(w, 1)
	defer stream.Close()
	agg := results.NewAggregator()
	s, _ := New(Config{Replicas: fleet(2, 5000), Model: model, MetricsInterval: DefaultMetricsInterval}, p, stream,
		Sink{Record: agg.Add, ITL: agg.AddITL})
	if err := s.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	m := agg.Metrics()
	fmt.Println(m.Requests, m.Completed)
	// Output: 40 40
}

// TestTextFreeRunsNeedNoText checks what lets cmd/simulate skip generating prompt text for a
// text-free policy: its run is record for record the same with the text as without it, on
// multi-turn chat whose next turns re-send the history. (prefix-score, which reads text,
// differs: the comparison has teeth.)
func TestTextFreeRunsNeedNoText(t *testing.T) {
	w := workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: 20},
		Requests: 400,
	}
	cfg := Config{Replicas: fleet(4, 0), Model: model, MetricsInterval: DefaultMetricsInterval}
	for _, policy := range []string{"round-robin", "least-request", "precise-prefix", "prefix-score"} {
		p, _ := router.Builtin().New(policy, nil, 1)
		with := simulate(t, cfg, policy, w, 3, workloads.WithText(true))
		without := simulate(t, cfg, policy, w, 3, workloads.WithText(false))
		if same := gocmp.Equal(with.records, without.records); same != !router.ReadsText(p) {
			t.Errorf("%s (reads text: %v): records the same without text: %v", policy, router.ReadsText(p), same)
		}
	}
}
