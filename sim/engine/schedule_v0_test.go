package engine

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// Each test here pins one rule of V0's scheduler (schedule_v0.go, which cites the vLLM code),
// against the V1 engine of LegacyRelease where the rule changes what V1 does.

// newV0Harness is a V0 replica with steps scheduler steps and 10 ms steps; shapes records
// every step's shape.
func newV0Harness(t *testing.T, rel Release, steps, blocks, maxBatch int) (*harness, *[]gpumodel.Step) {
	t.Helper()
	h := newHarnessFor(t, rel, blocks, maxBatch, 10*time.Millisecond)
	h.r.cfg.SchedulerSteps = steps
	var shapes []gpumodel.Step
	check := h.r.hooks.Step
	h.r.hooks.Step = func(at sim.Time, d time.Duration, s gpumodel.Step) {
		check(at, d, s)
		shapes = append(shapes, s)
	}
	return h, &shapes
}

// submitTogether submits reqs in order at one instant, before a step can start between them.
func (h *harness) submitTogether(at sim.Time, reqs ...*Request) {
	h.k.Schedule(at, 1, func(sim.Time) {
		for _, r := range reqs {
			h.r.Submit(r)
		}
	})
}

// A prompt that arrives while others decode runs in a step of its own: V0 schedules decodes
// only in steps that admit no prompt. V1 mixes it into the decode step.
func TestV0PromptStepsStallDecodes(t *testing.T) {
	for _, tc := range []struct {
		rel        Release
		wantDecode int // decoding sequences in the step that runs b's prompt
	}{{V0Release, 0}, {LegacyRelease, 1}} {
		t.Run(tc.rel.Name, func(t *testing.T) {
			h, shapes := newV0Harness(t, tc.rel, 1, 1000, 2048)
			h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 100), OutputTokens: 20})
			h.submitAt(sim.At(25*time.Millisecond), &Request{ID: "b", Prompt: tokens(2, 100), OutputTokens: 5})
			h.run()
			found := false
			for i, s := range *shapes {
				if i > 0 && s.PrefillTokens == 100 {
					found = true
					if s.DecodeSeqs != tc.wantDecode {
						t.Errorf("step %d runs b's prompt with %d decoding, want %d", i, s.DecodeSeqs, tc.wantDecode)
					}
				}
			}
			if !found || h.results["a"].Status != Completed || h.results["b"].Status != Completed {
				t.Fatalf("b's prompt step found: %v; results %+v", found, h.results)
			}
		})
	}
}

// Prompts are admitted whole while they fit max_num_batched_tokens; one that does not fit
// what is left waits for the next step, and one longer than the budget (the prompt limit) is
// ignored. V1 chunks both.
func TestV0WholePromptsWithinBudget(t *testing.T) {
	for _, tc := range []struct {
		rel       Release
		wantFirst []int64 // prompt tokens of the first two steps
		wantC     Status
	}{{V0Release, []int64{200, 100}, Rejected}, {LegacyRelease, []int64{256, 44 + 1}, Completed}} {
		t.Run(tc.rel.Name, func(t *testing.T) {
			h, shapes := newV0Harness(t, tc.rel, 1, 1000, 256)
			h.submitTogether(0, &Request{ID: "a", Prompt: tokens(1, 200), OutputTokens: 3},
				&Request{ID: "b", Prompt: tokens(2, 100), OutputTokens: 3})
			h.submitAt(sim.At(time.Second), &Request{ID: "c", Prompt: tokens(3, 300), OutputTokens: 3})
			h.run()
			s := *shapes
			if got := []int64{s[0].PrefillTokens, s[1].PrefillTokens + int64(s[1].DecodeSeqs)}; got[0] != tc.wantFirst[0] || got[1] != tc.wantFirst[1] {
				t.Errorf("first steps' tokens %v, want %v", got, tc.wantFirst)
			}
			if h.results["c"].Status != tc.wantC || h.results["a"].Status != Completed || h.results["b"].Status != Completed {
				t.Errorf("statuses a %v b %v c %v, want c %v", h.results["a"].Status, h.results["b"].Status,
					h.results["c"].Status, tc.wantC)
			}
		})
	}
}

// A prompt is admitted only when its blocks leave 1% of num_gpu_blocks free (the watermark),
// and ignored when they never can; V1 has no watermark.
func TestV0Watermark(t *testing.T) {
	for _, tc := range []struct {
		rel       Release
		firstStep int // prompts in the first step: b waits for a to finish under V0
		wantC     Status
	}{{V0Release, 1, Rejected}, {LegacyRelease, 2, Completed}} {
		t.Run(tc.rel.Name, func(t *testing.T) {
			h, shapes := newV0Harness(t, tc.rel, 1, 200, 4096) // watermark: 2 blocks
			h.submitTogether(0, &Request{ID: "a", Prompt: tokens(1, 195*16), OutputTokens: 1},
				&Request{ID: "b", Prompt: tokens(2, 4*16-1), OutputTokens: 1}) // 4 blocks: 1 left
			h.submitAt(sim.At(time.Second), &Request{ID: "c", Prompt: tokens(3, 199*16-1), OutputTokens: 1})
			h.run()
			if got := (*shapes)[0].PrefillChunks; got != tc.firstStep || h.results["b"].Status != Completed {
				t.Errorf("first step ran %d prompts, want %d; b ended %v", got, tc.firstStep, h.results["b"].Status)
			}
			if c := h.results["c"]; c.Status != tc.wantC {
				t.Errorf("c (199 of 200 blocks) ended %v, want %v", c.Status, tc.wantC)
			}
		})
	}
}

// With --num-scheduler-steps 4, a decode batch runs 4 steps between scheduling points: a
// request arriving inside a burst waits for its end, and a request whose last token comes
// inside a burst keeps its row until the burst ends and is reported then.
func TestV0DecodeBursts(t *testing.T) {
	ms := func(n int) sim.Time { return sim.At(time.Duration(n) * 10 * time.Millisecond) }
	for _, tc := range []struct {
		steps           int
		aFinish, bFirst sim.Time
	}{
		// a: prompt step 0–10 ms (token 1); bursts 10–50 (tokens 2–5), then b's prompt 50–60
		// (its token reported as the next step ends, at 70), then 60–100 (6–9), 100–140 (10,
		// its last, at 110, held to 140 and reported then: nothing runs after it).
		{4, ms(14), ms(7)},
		// One step per schedule: b's prompt runs at 30–40 ms, reported at 50; a's tokens one
		// per step after, its last at 110.
		{1, ms(11), ms(5)},
	} {
		h, shapes := newV0Harness(t, V0Release, tc.steps, 1000, 2048)
		h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 16), OutputTokens: 10})
		h.submitAt(sim.At(25*time.Millisecond), &Request{ID: "b", Prompt: tokens(2, 16), OutputTokens: 1})
		h.run()
		a, b := h.results["a"], h.results["b"]
		if a.Finish != tc.aFinish || a.OutputTokens != 10 || b.FirstToken != tc.bFirst {
			t.Errorf("steps %d: a finished %v with %d tokens, b's first token %v; want %v, 10, %v",
				tc.steps, a.Finish, a.OutputTokens, b.FirstToken, tc.aFinish, tc.bFirst)
		}
		if last := (*shapes)[len(*shapes)-1]; tc.steps == 4 && last.DecodeSeqs != 1 {
			t.Errorf("the burst's last step ran %d rows, want a's held row", last.DecodeSeqs)
		}
		if m := h.r.Metrics(); m.GenerationTokens != 11 {
			t.Errorf("steps %d: %d tokens generated, want 11 (held rows give none)", tc.steps, m.GenerationTokens)
		}
	}
}

// A first token or a completion is reported when the step after the one that produced it
// ends (async output processing), or at once when nothing runs after it. V1 reports it as
// its own step ends.
func TestV0OutputsOneStepLate(t *testing.T) {
	ms := func(n int) sim.Time { return sim.At(time.Duration(n) * 10 * time.Millisecond) }
	for _, tc := range []struct {
		rel                   Release
		aFirst, bFirst, bDone sim.Time
	}{
		// a's prompt 0–10, decodes after; b's prompt 30–40 (V0: a stalls), b done after 2
		// tokens at 50 (its decode step 40–50), reported as a's next step ends.
		{V0Release, ms(2), ms(5), ms(6)},
		{LegacyRelease, ms(1), ms(4), ms(5)},
	} {
		h, _ := newV0Harness(t, tc.rel, 1, 1000, 2048)
		h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 16), OutputTokens: 20})
		h.submitAt(sim.At(25*time.Millisecond), &Request{ID: "b", Prompt: tokens(2, 16), OutputTokens: 2})
		h.run()
		a, b := h.results["a"], h.results["b"]
		if a.FirstToken != tc.aFirst || b.FirstToken != tc.bFirst || b.Finish != tc.bDone {
			t.Errorf("%s: a's first token %v, b's %v, b done %v; want %v, %v, %v", tc.rel.Name,
				a.FirstToken, b.FirstToken, b.Finish, tc.aFirst, tc.bFirst, tc.bDone)
		}
	}
}

// When blocks run out, the newest running request is preempted and later recomputed whole.
func TestV0PreemptsNewest(t *testing.T) {
	h, _ := newV0Harness(t, V0Release, 4, 12, 2048)
	h.submitTogether(0, &Request{ID: "a", Prompt: tokens(1, 64), OutputTokens: 64},
		&Request{ID: "b", Prompt: tokens(2, 64), OutputTokens: 64})
	h.run()
	a, b := h.results["a"], h.results["b"]
	if a.Status != Completed || b.Status != Completed || a.Preemptions != 0 || b.Preemptions == 0 || a.Finish >= b.Finish {
		t.Fatalf("a %+v\nb %+v: want b preempted and a finished first", a, b)
	}
}

func TestSchedulerStepsNeedV0(t *testing.T) {
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	for _, tc := range []struct {
		rel   Release
		steps int
		ok    bool
	}{{V0Release, 10, true}, {V0Release, 0, true}, {NewestRelease, 1, true}, {NewestRelease, 10, false},
		{LegacyRelease, 2, false}, {V0Release, -1, false}} {
		_, err := New(sim.NewKernel(), Config{Deployment: d, Release: tc.rel, SchedulerSteps: tc.steps}, Hooks{})
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "num_scheduler_steps") {
			t.Errorf("%s with %d steps: %v, want ok %v", tc.rel.Name, tc.steps, err, tc.ok)
		}
	}
}

// TestV0Invariants runs random scripts (those of TestMatchesReference: shared prefixes, tiny
// caches, small budgets, failures) on the V0 release with 1–10 scheduler steps, checking at
// every step that block references match the block tables and that the batch keeps the
// limits, and at the end that every request ended once, with all its tokens when it
// completed, that the generated-token count adds up and that no block is left referenced.
func TestV0Invariants(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	for seed := range uint64(rounds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		sc := randomScript(rng)
		sc.cfg.Release = V0Release
		sc.cfg.Offload = OffloadConfig{} // V1's connector only
		sc.cfg.SchedulerSteps = []int{0, 1, 4, 10}[rng.IntN(4)]
		h := &harness{t: t, k: sim.NewKernel(), results: map[string]Result{}}
		var err error
		h.r, err = New(h.k, sc.cfg, Hooks{
			Done: func(res Result) {
				if _, dup := h.results[res.Request.ID]; dup {
					t.Fatalf("seed %d: request %s ended twice", seed, res.Request.ID)
				}
				h.results[res.Request.ID] = res
			},
			Step: func(_ sim.Time, _ time.Duration, s gpumodel.Step) {
				if h.r.pool.size() <= 4096 { // the small caches, where blocks run out; O(blocks)
					h.checkRefs()
				}
				if s.PrefillTokens > int64(h.r.maxBatch) || s.PrefillChunks+s.DecodeSeqs > h.r.maxSeqs {
					t.Fatalf("seed %d: step %+v over the limits (%d tokens, %d seqs)", seed, s, h.r.maxBatch, h.r.maxSeqs)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range sc.reqs {
			req := q.req
			h.k.Schedule(q.at, 0, func(sim.Time) { h.r.Submit(&req) })
		}
		for i, f := range sc.fails {
			h.k.Schedule(f, -1, func(sim.Time) { h.r.Fail() })
			h.k.Schedule(sc.recover[i], -1, func(sim.Time) { h.r.Recover() })
		}
		// A bound, so that a request that never ends fails the test instead of hanging it.
		if err := h.k.Run(sim.At(10 * time.Minute)); err != nil {
			t.Fatal(err)
		}
		var generated int64
		for _, q := range sc.reqs {
			res, ok := h.results[q.req.ID]
			switch {
			case !ok:
				t.Fatalf("seed %d: request %s never ended", seed, q.req.ID)
			case res.Status == Completed && (res.OutputTokens != q.req.OutputTokens || res.FirstToken > res.Finish):
				t.Fatalf("seed %d: request %s completed with %d of %d tokens, first %v finish %v",
					seed, q.req.ID, res.OutputTokens, q.req.OutputTokens, res.FirstToken, res.Finish)
			}
			generated += int64(res.OutputTokens)
		}
		if m := h.r.Metrics(); len(sc.fails) == 0 && m.GenerationTokens != generated {
			t.Fatalf("seed %d: %d tokens generated, requests report %d", seed, m.GenerationTokens, generated)
		}
		if used := h.r.pool.used(); used != 0 {
			t.Fatalf("seed %d: %d blocks still referenced at the end", seed, used)
		}
	}
}

// A V0 step costs its GPU price plus the release's host time, unhidden; V1 without async
// scheduling pays the GPU price alone.
func TestV0HostStep(t *testing.T) {
	for _, rel := range []Release{V0Release, LegacyRelease} {
		t.Run(rel.Name, func(t *testing.T) {
			h, _ := newV0Harness(t, rel, 1, 1000, 2048)
			h.r.cfg.StepTime = nil // the deployment's own price
			p, err := gpumodel.NewPricer(h.r.cfg.Deployment)
			if err != nil {
				t.Fatal(err)
			}
			steps := 0
			check := h.r.hooks.Step
			h.r.hooks.Step = func(at sim.Time, d time.Duration, s gpumodel.Step) {
				check(at, d, s)
				steps++
				if want := p.StepTime(s) + rel.HostStep; d != want {
					t.Errorf("step %d took %v, want %v (GPU %v + host %v)", steps, d, want, p.StepTime(s), rel.HostStep)
				}
			}
			h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 100), OutputTokens: 5})
			h.run()
			if steps == 0 || V0Release.HostStep <= 0 {
				t.Fatalf("%d steps, V0 host time %v: nothing checked", steps, V0Release.HostStep)
			}
		})
	}
}
