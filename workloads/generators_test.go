package workloads

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestSharedPrefixSGLang(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Arrival = ArrivalConfig{Process: ProcessImmediate}
	reqs := drive(t, mustBuild(t, cfg, 1, WithText(false)), fixedService(time.Second), nil)
	if len(reqs) != 64*16 {
		t.Fatalf("%d requests, want 64 × 16", len(reqs))
	}
	prefix := map[string][]int32{}
	seen := map[string]bool{}
	for _, r := range reqs {
		if len(r.Tokens) != 2048+128 || r.OutputTokens != 256 || r.Arrival != 0 {
			t.Fatalf("%s: %d tokens, output %d, at %v; want 2176, 256, 0", r.ID, len(r.Tokens), r.OutputTokens, r.Arrival)
		}
		p, ok := prefix[r.PrefixGroup]
		if !ok {
			prefix[r.PrefixGroup] = r.Tokens[:2048]
		} else if !slices.Equal(p, r.Tokens[:2048]) {
			t.Fatalf("%s: system prompt differs within group %s", r.ID, r.PrefixGroup)
		}
		q := string(Words(r.Tokens[2048:]))
		if seen[q] {
			t.Fatalf("%s: question sent twice", r.ID)
		}
		seen[q] = true
	}
	if len(prefix) != 64 {
		t.Errorf("%d groups, want 64", len(prefix))
	}
	if reqs[0].PrefixGroup == "g0" && reqs[1].PrefixGroup == "g0" && reqs[2].PrefixGroup == "g0" {
		t.Error("requests are not shuffled")
	}
}

func TestSharedPrefixInferencePerf(t *testing.T) {
	cfg := Config{Workload: WorkloadConfig{Preset: PresetInferencePerf}, Arrival: ArrivalConfig{Rate: 100}, Requests: 2000}
	reqs := drive(t, mustBuild(t, cfg, 1, WithText(false)), fixedService(time.Second), nil)
	distinct := map[string]int{}
	for _, r := range reqs {
		if len(r.Tokens) != 150 || r.OutputTokens != 50 {
			t.Fatalf("%s: %d tokens, output %d; want 150, 50", r.ID, len(r.Tokens), r.OutputTokens)
		}
		distinct[Words(r.Tokens)]++
	}
	if len(distinct) != 100 {
		t.Errorf("%d distinct prompts, want all 10 × 10 to recur", len(distinct))
	}
	rate := float64(len(reqs)) / reqs[len(reqs)-1].Arrival.Seconds()
	if math.Abs(rate-100)/100 > 0.06 {
		t.Errorf("rate %.1f/s, want 100/s", rate)
	}
}

func TestSyntheticChatStatistics(t *testing.T) {
	cfg := Config{Workload: WorkloadConfig{Kind: KindSyntheticChat, SystemPrompts: 5, SystemPromptTokens: 100},
		Arrival: ArrivalConfig{Rate: 5}, Duration: 40 * time.Minute}
	var sessions, turns, userTokens, outputTokens, systemTokens int
	groups := map[string]int{}
	last := map[string]Request{}
	drive(t, mustBuild(t, cfg, 11, WithText(false)), fixedService(time.Second), func(r Request) {
		turns++
		outputTokens += r.OutputTokens
		if p, ok := last[r.Session]; ok {
			userTokens += len(r.Tokens) - len(p.Tokens) - p.OutputTokens
		} else {
			sessions++
			groups[r.PrefixGroup]++
			systemTokens += 100
			userTokens += len(r.Tokens) - 100
		}
		last[r.Session] = r
	})
	checks := []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"sessions per second", float64(sessions) / 2400, 5, 0.03},
		{"turns per session", float64(turns) / float64(sessions), 3.51, 0.03},
		{"user message tokens", float64(userTokens) / float64(turns), 161, 0.03},
		{"answer tokens", float64(outputTokens) / float64(turns), 338, 0.03},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want)/c.want > c.tol {
			t.Errorf("%s = %.3f, want %.3f ±%.0f%%", c.name, c.got, c.want, 100*c.tol)
		}
	}
	for g, n := range groups {
		if share := float64(n) / float64(sessions); math.Abs(share-0.2) > 0.03 {
			t.Errorf("system prompt %s used by %.3f of sessions, want 0.2", g, share)
		}
	}
}

func TestSyntheticChatLengthDists(t *testing.T) {
	for _, dist := range []string{DistLogNormal, DistExponential, DistConstant} {
		t.Run(dist, func(t *testing.T) {
			cfg := Config{Workload: WorkloadConfig{Kind: KindSyntheticChat, MeanTurns: 1, LengthDist: dist, PromptTokens: 50, OutputTokens: 80},
				Arrival: ArrivalConfig{Process: ProcessImmediate}, Requests: 20000}
			var in, out float64
			reqs := 0
			drive(t, mustBuild(t, cfg, 2, WithText(false)), fixedService(0), func(r Request) {
				in += float64(len(r.Tokens))
				out += float64(r.OutputTokens)
				reqs++
			})
			if in /= float64(reqs); math.Abs(in-50)/50 > 0.03 {
				t.Errorf("mean prompt %.2f tokens, want 50", in)
			}
			if out /= float64(reqs); math.Abs(out-80)/80 > 0.03 {
				t.Errorf("mean output %.2f tokens, want 80", out)
			}
		})
	}
}

func TestMixTenants(t *testing.T) {
	cfg := Config{
		Workload: WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{
			{Name: "a", Weight: 3, Workload: WorkloadConfig{Kind: KindSyntheticChat, MeanTurns: 1, PromptTokens: 10, OutputTokens: 10}},
			{Name: "b", Weight: 1, Workload: WorkloadConfig{Preset: PresetInferencePerf}},
			{Name: "flood", Workload: WorkloadConfig{Preset: PresetInferencePerf},
				Arrival: &ArrivalConfig{Process: ProcessGamma, Rate: 80, Burstiness: 0.5}},
		}},
		Arrival:  ArrivalConfig{Rate: 20},
		Duration: 5 * time.Minute,
	}
	counts := map[string]int{}
	ids := map[string]bool{}
	drive(t, mustBuild(t, cfg, 4, WithText(false)), fixedService(time.Second), func(r Request) {
		counts[r.Tenant]++
		if ids[r.ID] || r.ID[:len(r.Tenant)+1] != r.Tenant+"/" {
			t.Fatalf("request ID %q repeated or not prefixed by its tenant %q", r.ID, r.Tenant)
		}
		ids[r.ID] = true
	})
	want := map[string]float64{"a": 15, "b": 5, "flood": 80} // requests per second
	for name, rate := range want {
		if got := float64(counts[name]) / 300; math.Abs(got-rate)/rate > 0.06 {
			t.Errorf("tenant %s: %.2f req/s, want %.0f", name, got, rate)
		}
	}
}

func TestMixExhaustedTenant(t *testing.T) {
	cfg := Config{
		Workload: WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{
			{Name: "finite", Workload: WorkloadConfig{Groups: 2, PromptsPerGroup: 3, SystemPromptTokens: 4, QuestionTokens: 4}},
			{Name: "trace", Workload: WorkloadConfig{Kind: KindAzure, Path: "testdata/azure_small.csv"}},
		}},
		Arrival: ArrivalConfig{Process: ProcessConstant, Rate: 1},
	}
	counts := map[string]int{}
	drive(t, mustBuild(t, cfg, 1), fixedService(time.Second), func(r Request) { counts[r.Tenant]++ })
	if counts["finite"] != 6 || counts["trace"] != 6 {
		t.Errorf("counts %v, want every request of both tenants once", counts)
	}
}
