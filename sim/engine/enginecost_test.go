package engine

import (
	"fmt"
	"testing"

	"kvroute/gpumodel"
	"kvroute/sim"
	"kvroute/workloads"
)

// fleetEngine is what the engine benchmark drives: a replica or its reference.
type fleetEngine interface {
	Submit(*Request)
	Metrics() Metrics
}

// engineMakers builds each engine for BenchmarkEngines: the replica with one hash memo for
// the fleet (as sim/cluster builds it), and the reference engine (reference_test.go).
func engineMakers() []struct {
	name string
	mk   func(k *sim.Kernel, cfgs []Config, hooks Hooks) ([]fleetEngine, error)
} {
	return []struct {
		name string
		mk   func(k *sim.Kernel, cfgs []Config, hooks Hooks) ([]fleetEngine, error)
	}{
		{"optimised", func(k *sim.Kernel, cfgs []Config, hooks Hooks) ([]fleetEngine, error) {
			memo := NewHashMemo(256 * len(cfgs))
			var out []fleetEngine
			for _, c := range cfgs {
				c.Memo = memo
				r, err := New(k, c, hooks)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		}},
		{"reference", func(k *sim.Kernel, cfgs []Config, hooks Hooks) ([]fleetEngine, error) {
			var out []fleetEngine
			for _, c := range cfgs {
				r, err := newRef(k, c, hooks)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		}},
	}
}

// fleetRun is the outcome of runEngineFleet, identical for both engines when they agree.
type fleetRun struct {
	end                   sim.Time
	completed, generated  int64
	prefixHits, preempted int64
}

// runEngineFleet plays the workload w (seed 1) through n H100 Llama-3.1-8B replicas built by
// mk, round-robin and closed-loop (a session's next turn follows its answer), with nothing
// of sim/cluster around them: no router, no scrapes, no network delay. It is the engine's
// share of BenchmarkSimulate's round-robin runs.
func runEngineFleet(tb testing.TB, w workloads.Config, n int,
	mk func(*sim.Kernel, []Config, Hooks) ([]fleetEngine, error)) fleetRun {
	tb.Helper()
	stream, err := workloads.Build(w, 1, workloads.WithText(false))
	if err != nil {
		tb.Fatal(err)
	}
	defer stream.Close()
	k := sim.NewKernel()
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	cfgs := make([]Config, n)
	for i := range cfgs {
		cfgs[i] = Config{Deployment: d}
	}
	pending := sim.Never // the time of the earliest arrival event scheduled
	var arm, arrive func(now sim.Time)
	next := 0
	var reps []fleetEngine
	hooks := Hooks{Done: func(res Result) {
		id := res.Request.ID
		if err := stream.Done(id, workloads.Completion{At: res.Finish.Duration(), Failed: res.Status != Completed}); err != nil {
			tb.Fatal(err)
		}
		arm(res.Finish)
	}}
	arm = func(now sim.Time) {
		at, ok := stream.PeekArrival()
		if !ok || sim.Time(at) >= pending {
			return
		}
		pending = max(sim.Time(at), now)
		k.Schedule(pending, 0, arrive)
	}
	arrive = func(now sim.Time) {
		if now == pending {
			pending = sim.Never
		}
		for {
			at, ok := stream.PeekArrival()
			if !ok || sim.Time(at) > now {
				break
			}
			q, _ := stream.Next()
			req := &Request{ID: q.ID, Prompt: q.Tokens, OutputTokens: q.OutputTokens, Answer: q.AnswerTokens, Salt: 7}
			reps[next%n].Submit(req)
			next++
		}
		arm(now)
	}
	if reps, err = mk(k, cfgs, hooks); err != nil {
		tb.Fatal(err)
	}
	arm(0)
	if err := k.Run(sim.Never); err != nil {
		tb.Fatal(err)
	}
	out := fleetRun{end: k.Now()}
	for _, r := range reps {
		m := r.Metrics()
		out.completed += m.Completed
		out.generated += m.GenerationTokens
		out.prefixHits += m.PrefixHits
		out.preempted += m.Preemptions
	}
	return out
}

// engineShapes are BenchmarkSimulate's multi-turn and single-turn workloads
// (sim/cluster/bench_test.go) and the shared-prefix shape of sim/cluster's tests.
func engineShapes(requests int) []struct {
	name string
	w    workloads.Config
} {
	repeat := true
	chat := func(turns int, rate float64) workloads.Config {
		return workloads.Config{
			Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat, MeanTurns: float64(turns), MaxTurns: turns},
			Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: rate},
			Requests: requests,
		}
	}
	return []struct {
		name string
		w    workloads.Config
	}{
		{"multi-turn/40sps", chat(0, 40)},
		{"single-turn/100rps", chat(1, 100)},
		{"shared-prefix/100rps", workloads.Config{
			Workload: workloads.WorkloadConfig{
				Kind: workloads.KindSharedPrefix, Groups: 16, PromptsPerGroup: 8, SystemPromptTokens: 2048,
				QuestionTokens: 64, OutputTokens: 32, Repeat: &repeat,
			},
			Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: 100},
			Requests: requests,
		}},
	}
}

// TestEngineFleetsAgree checks the benchmark's premise: on each shape both engines simulate
// the same run (same end time, tokens, hits and preemptions), so they time the same work.
func TestEngineFleetsAgree(t *testing.T) {
	requests := 2000
	if testing.Short() {
		requests = 300
	}
	for _, sh := range engineShapes(requests) {
		t.Run(sh.name, func(t *testing.T) {
			var runs []fleetRun
			for _, e := range engineMakers() {
				runs = append(runs, runEngineFleet(t, sh.w, 8, e.mk))
			}
			if runs[0] != runs[1] {
				t.Fatalf("optimised %+v, reference %+v", runs[0], runs[1])
			}
			if runs[0].completed != int64(requests) {
				t.Fatalf("completed %d of %d", runs[0].completed, requests)
			}
		})
	}
}

// BenchmarkEngines times the same workload through eight replicas of each engine, with no
// cluster around them (runEngineFleet). Compare the two engines as a ratio of paired,
// alternating runs: BenchmarkEngines/<shape>/reference against .../optimised.
func BenchmarkEngines(b *testing.B) {
	const requests = 20000
	for _, sh := range engineShapes(requests) {
		for _, e := range engineMakers() {
			b.Run(fmt.Sprintf("%s/%s", sh.name, e.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if got := runEngineFleet(b, sh.w, 8, e.mk); got.completed != requests {
						b.Fatalf("completed %d of %d", got.completed, requests)
					}
				}
				b.ReportMetric(float64(requests*b.N)/b.Elapsed().Seconds(), "requests/s")
			})
		}
	}
}
