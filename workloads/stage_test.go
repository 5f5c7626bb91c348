package workloads

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func stagedConfig(drain *bool, stages ...StageConfig) Config {
	repeat := true
	return Config{
		Workload: WorkloadConfig{Kind: KindSharedPrefix, Groups: 3, PromptsPerGroup: 2, SystemPromptTokens: 32,
			QuestionTokens: 8, OutputTokens: 4, Repeat: &repeat},
		Arrival: ArrivalConfig{Process: ProcessPoisson, Stages: stages, Drain: drain},
	}
}

// TestStagesDrain checks inference-perf's stage semantics: floor(rate·duration) requests per
// stage from 1 s after it begins, and the next stage only once every one has finished, on
// the 1 s poll grid, plus the interval.
func TestStagesDrain(t *testing.T) {
	stages := []StageConfig{{Rate: 10, Duration: 5 * time.Second, Warmup: true}, {Rate: 2.5, Duration: 3 * time.Second},
		{Rate: 0.2, Duration: 2 * time.Second}, {Rate: 40, Duration: 2 * time.Second}}
	for _, service := range []time.Duration{10 * time.Millisecond, 2500 * time.Millisecond} {
		t.Run(service.String(), func(t *testing.T) {
			s := mustBuild(t, stagedConfig(nil, stages...), 7, WithText(false))
			reqs := drive(t, s, fixedService(service), nil)
			spans := s.Stages()
			if len(spans) != len(stages) || spans[0].Start != 0 {
				t.Fatalf("stages %+v, want %d from 0", spans, len(stages))
			}
			// Oracle: a stage ends at its timer origin (start + 1 s) + duration, or at the first
			// poll of its 1 s grid after its last finish; the next starts 1 s later.
			lastDone := make([]time.Duration, len(stages))
			for _, r := range reqs {
				k := s.StageAt(r.Arrival)
				lastDone[k] = max(lastDone[k], r.Arrival+service)
			}
			for k := range len(stages) - 1 {
				end := spans[k].Start + time.Second + stages[k].Duration
				if lastDone[k] > end {
					end += time.Duration(math.Ceil((lastDone[k] - end).Seconds())) * time.Second
				}
				if want := end + time.Second; spans[k+1].Start != want {
					t.Errorf("stage %d starts at %v, want %v (stage %d's last finish %v)", k+1, spans[k+1].Start, want, k, lastDone[k])
				}
			}
			count := make([]int, len(stages))
			for _, r := range reqs {
				k := s.StageAt(r.Arrival)
				count[k]++
				if origin := spans[k].Start + time.Second; r.Arrival < origin {
					t.Errorf("%s arrives at %v, before stage %d's timer starts at %v", r.ID, r.Arrival, k, origin)
				}
			}
			if d := cmp.Diff([]int{50, 7, 0, 80}, count); d != "" {
				t.Errorf("requests per stage (-want +got):\n%s", d)
			}
			for i, sp := range spans {
				if sp.Sessions != count[i] || sp.Warmup != stages[i].Warmup || sp.Rate != stages[i].Rate {
					t.Errorf("span %d = %+v, want %d sessions of stage %+v", i, sp, count[i], stages[i])
				}
			}
		})
	}
}

// TestStagesPoissonTimer checks inference-perf's Poisson timer: the arrivals of each whole
// second after the origin fall in that second, the last one exactly at its end.
func TestStagesPoissonTimer(t *testing.T) {
	s := mustBuild(t, stagedConfig(nil, StageConfig{Rate: 30, Duration: 40 * time.Second}), 3, WithText(false))
	reqs := drive(t, s, fixedService(time.Millisecond), nil)
	if len(reqs) != 1200 {
		t.Fatalf("got %d requests, want 1200", len(reqs))
	}
	ends := 0
	for _, r := range reqs {
		if sec := r.Arrival.Seconds(); math.Abs(sec-math.Round(sec)) < 1e-6 {
			ends++
		}
	}
	// Every second with arrivals ends with one, and the seconds are ~ 1200/30.
	if ends < 35 || ends > 45 {
		t.Errorf("%d arrivals on whole seconds, want about 40", ends)
	}
}

// TestStagesContinuous checks the ladder without draining: each stage offers its rate over
// its window on a shared clock, and arrivals never wait on completions.
func TestStagesContinuous(t *testing.T) {
	off := false
	stages := []StageConfig{{Rate: 20, Duration: 10 * time.Second}, {Rate: 100, Duration: 10 * time.Second}}
	s := mustBuild(t, stagedConfig(&off, stages...), 5, WithText(false))
	reqs := drive(t, s, fixedService(time.Hour), nil)
	var got [2]int
	for _, r := range reqs {
		got[s.StageAt(r.Arrival)]++
		if r.Arrival >= 20*time.Second {
			t.Fatalf("%s arrives at %v, after the last stage", r.ID, r.Arrival)
		}
	}
	if got[0] < 150 || got[0] > 250 || got[1] < 850 || got[1] > 1150 {
		t.Errorf("requests per stage %v, want about [200 1000]", got)
	}
	if starts := []time.Duration{s.Stages()[0].Start, s.Stages()[1].Start}; !slices.Equal(starts, []time.Duration{0, 10 * time.Second}) {
		t.Errorf("stage starts %v, want [0 10s]", starts)
	}
}

// TestStagesInFlight checks that a draining stage holds the stream open until its requests
// are done, and what InFlight reports meanwhile.
func TestStagesInFlight(t *testing.T) {
	s := mustBuild(t, stagedConfig(nil, StageConfig{Rate: 2, Duration: time.Second}, StageConfig{Rate: 1, Duration: time.Second}), 1, WithText(false))
	var ids []string
	for {
		r, ok := s.Next()
		if !ok {
			break
		}
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || s.InFlight() != 2 {
		t.Fatalf("took %v with %d in flight, want 2 and 2", ids, s.InFlight())
	}
	if err := s.Done(ids[0], Completion{At: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Peek(); ok || s.InFlight() != 1 {
		t.Fatalf("the next stage started before the first drained (in flight %d)", s.InFlight())
	}
	if err := s.Done(ids[1], Completion{At: 4500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r, ok := s.Peek()
	// Stage 0: origin 1 s, duration to 2 s, last finish 4.5 s → ends at 5 s; stage 1 starts at 6 s.
	if !ok || r.Arrival < 7*time.Second || s.Stages()[1].Start != 6*time.Second {
		t.Fatalf("next request %+v (ok %v), stages %+v; want stage 1 from 6 s, arrivals from 7 s", r, ok, s.Stages())
	}
}

// TestCycleRestartsEachStage checks inference-perf's prompt order: one shuffled list, sent
// in order and from its head again at every stage.
func TestCycleRestartsEachStage(t *testing.T) {
	cfg := stagedConfig(nil, StageConfig{Rate: 8, Duration: time.Second}, StageConfig{Rate: 4, Duration: time.Second})
	cfg.Workload.Cycle = true
	s := mustBuild(t, cfg, 9, WithText(false))
	var prompts []string
	drive(t, s, fixedService(time.Millisecond), func(r Request) {
		prompts = append(prompts, fmt.Sprint(r.Tokens[len(r.Tokens)-8:]))
	})
	if len(prompts) != 12 {
		t.Fatalf("got %d requests, want 12", len(prompts))
	}
	first, second := prompts[:8], prompts[8:]
	if d := cmp.Diff(first[6:8], first[:2]); d != "" {
		t.Errorf("the list of 6 prompts does not wrap around (-want +got):\n%s", d)
	}
	if d := cmp.Diff(first[:4], second); d != "" {
		t.Errorf("stage 1 does not start again at the head (-want +got):\n%s", d)
	}
	seen := map[string]bool{}
	for _, p := range first[:6] {
		seen[p] = true
	}
	if len(seen) != 6 {
		t.Errorf("one cycle sent %d distinct prompts, want all 6: %v", len(seen), first[:6])
	}
}

// TestStagesValidate checks the config errors of staged arrivals, each naming its field.
func TestStagesValidate(t *testing.T) {
	off := false
	one := []StageConfig{{Rate: 1, Duration: time.Second}}
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"rate beside stages", func(c *Config) { c.Arrival.Rate = 3 }, "arrival.rate: not used with stages"},
		{"zero duration", func(c *Config) { c.Arrival.Stages = []StageConfig{{Rate: 1}} }, "arrival.stages[0].duration"},
		{"bad rate", func(c *Config) { c.Arrival.Stages = []StageConfig{{Rate: math.NaN(), Duration: time.Second}} }, "arrival.stages[0].rate"},
		{"immediate", func(c *Config) { c.Arrival.Process = ProcessImmediate }, "arrival.stages: need process poisson"},
		{"drain without stages", func(c *Config) { c.Arrival.Stages = nil; c.Arrival.Drain = &off }, "drain and stage_interval need stages"},
		{"interval without drain", func(c *Config) { c.Arrival.Drain = &off; c.Arrival.StageInterval = time.Second }, "arrival.stage_interval: only used when stages drain"},
		{"normalize", func(c *Config) { c.Arrival.Normalize = true; c.Requests = 3 }, "arrival.normalize: not used with stages"},
		{"cycle without repeat", func(c *Config) { c.Workload.Cycle = true; *c.Workload.Repeat = false }, "workload.cycle: needs repeat"},
		{"tenant stages", func(c *Config) {
			a := ArrivalConfig{Stages: one}
			c.Workload = WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{{Name: "a", Workload: WorkloadConfig{Kind: KindSharedPrefix}, Arrival: &a}}}
		}, "workload.tenants[0].arrival.stages: only the top-level arrival"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := stagedConfig(nil, one...)
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := stagedConfig(nil, one...).Validate(); err != nil {
		t.Errorf("valid staged config: %v", err)
	}
}

// TestStagesDeterministic checks that the same seed gives the same staged stream.
func TestStagesDeterministic(t *testing.T) {
	cfg := stagedConfig(nil, StageConfig{Rate: 20, Duration: 3 * time.Second}, StageConfig{Rate: 50, Duration: 2 * time.Second})
	run := func() []time.Duration {
		var at []time.Duration
		drive(t, mustBuild(t, cfg, 11, WithText(false)), fixedService(700*time.Millisecond), func(r Request) { at = append(at, r.Arrival) })
		return at
	}
	if a, b := run(), run(); !slices.Equal(a, b) || len(a) != 160 {
		t.Errorf("two runs differ or have the wrong size: %d and %d arrivals", len(a), len(b))
	}
}
