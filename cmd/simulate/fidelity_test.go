package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fidelityRun runs examples/published/<file> with the replacements applied (each must match),
// and returns the summary's metrics by run name.
func fidelityRun(t *testing.T, file string, repl ...string) map[string]map[string]any {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "published", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("%s changed shape: %q not found; update the test", file, repl[i])
		}
		s = strings.Replace(s, repl[i], repl[i+1], 1)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, file)
	if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	runSim(t, "-config", cfg, "-out", out, "-quiet")
	var sum struct {
		Runs []struct {
			Name      string
			Metrics   map[string]any
			StageMean map[string]any `json:"stage_mean"`
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	runs := map[string]map[string]any{}
	for _, r := range sum.Runs {
		if r.Metrics["completed"] != r.Metrics["requests"] {
			t.Errorf("%s: %v of %v requests completed", r.Name, r.Metrics["completed"], r.Metrics["requests"])
		}
		if r.StageMean != nil {
			r.Metrics["stage_mean"] = r.StageMean // the mean over a ladder's stages, as llm-d reports
		}
		runs[r.Name] = r.Metrics
	}
	return runs
}

func metric(t *testing.T, runs map[string]map[string]any, run string, path ...string) float64 {
	t.Helper()
	m, ok := runs[run]
	if !ok {
		t.Fatalf("no run %q", run)
	}
	var v any = m
	for _, p := range path {
		v = v.(map[string]any)[p]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%s %v: not a number: %v", run, path, v)
	}
	return f
}

func totalTokS(t *testing.T, runs map[string]map[string]any, run string) float64 {
	return metric(t, runs, run, "input_tokens_per_s") + metric(t, runs, run, "output_tokens_per_s")
}

// TestPublishedFidelityDirections runs reduced copies of examples/published/ and checks the
// direction of each published result that the simulator reproduces (README "Fidelity"; the
// full-size numbers come from `make fidelity`). Not asserted because the simulator gets them
// wrong at full size: KubeAI's LeastLoad faster than the K8s Service (least-request's mean TTFT is 5% above random's).
func TestPublishedFidelityDirections(t *testing.T) {
	if testing.Short() {
		t.Skip("fidelity scenarios are slow")
	}
	t.Run("sglang-v0.4", func(t *testing.T) {
		// Full size already (1,024 requests); fast enough as is.
		runs := fidelityRun(t, "sglang-v0.4.yaml")
		if ca, rr := metric(t, runs, "cache-aware", "hit_rate"), metric(t, runs, "round-robin", "hit_rate"); ca <= rr {
			t.Errorf("hit rate: cache-aware %.3f, round-robin %.3f; published 0.75 > 0.20", ca, rr)
		}
		if ca, rr := totalTokS(t, runs, "cache-aware"), totalTokS(t, runs, "round-robin"); ca <= rr {
			t.Errorf("total tok/s: cache-aware %.0f, round-robin %.0f; published 158,596 > 82,665", ca, rr)
		}
	})
	t.Run("sglang-v0.4-5-per-group", func(t *testing.T) {
		// Our reading of the workload (5 prompts per group): the hit rates land on the
		// published 20% and 75%, and cache-aware's throughput gain is the published direction.
		runs := fidelityRun(t, "sglang-v0.4-5-per-group.yaml")
		for run, want := range map[string]float64{"round-robin": 0.20, "cache-aware": 0.75} {
			if got := metric(t, runs, run, "hit_rate"); got < want-0.05 || got > want+0.05 {
				t.Errorf("%s hit rate %.3f, published %.2f", run, got, want)
			}
		}
		if ca, rr := totalTokS(t, runs, "cache-aware"), totalTokS(t, runs, "round-robin"); ca <= rr {
			t.Errorf("total tok/s: cache-aware %.0f, round-robin %.0f; published 158,596 > 82,665", ca, rr)
		}
	})
	t.Run("llm-d", func(t *testing.T) {
		// The warm-up and three ladder stages (one below, two above the cache-blind knee),
		// one run per published profile.
		runs := fidelityRun(t, "llm-d-kv-cache-wins.yaml",
			llmdLadder, "    - {rate: 15, duration: 50s, warmup: true}\n    - {rate: 10, duration: 20s}\n"+
				"    - {rate: 30, duration: 25s}\n    - {rate: 49, duration: 15s}\n",
			llmdPolicies, "  - {name: precise-prefix, prefix_weight: 3, kv_cache_weight: 2, queue_weight: 2}\n"+
				"  - {name: prefix-score, prefix_weight: 1, kv_cache_weight: 1, queue_weight: 1, auto_tune: false}\n"+
				"  - {name: prefix-score, prefix_weight: 0, kv_cache_weight: 1, queue_weight: 1}\n  - random\n")
		const (
			precise = "precise-prefix,kv_cache_weight=2,prefix_weight=3,queue_weight=2"
			approx  = "prefix-score,auto_tune=false,kv_cache_weight=1,prefix_weight=1,queue_weight=1"
			load    = "prefix-score,kv_cache_weight=1,prefix_weight=0,queue_weight=1"
		)
		// Published order, mean over stages: TTFT p90 precise < approximate < load ≈ random,
		// output tok/s the reverse.
		for _, pair := range [][2]string{{precise, approx}, {approx, load}, {approx, "random"}} {
			if a, b := metric(t, runs, pair[0], "stage_mean", "ttft_ms", "p90"), metric(t, runs, pair[1], "stage_mean", "ttft_ms", "p90"); a >= b {
				t.Errorf("stage-mean TTFT p90: %s %.0f ms, %s %.0f ms; published the first far below", pair[0], a, pair[1], b)
			}
			if a, b := metric(t, runs, pair[0], "stage_mean", "output_tokens_per_s"), metric(t, runs, pair[1], "stage_mean", "output_tokens_per_s"); a <= b {
				t.Errorf("stage-mean output tok/s: %s %.0f, %s %.0f; published the first above", pair[0], a, pair[1], b)
			}
		}
	})
	t.Run("llm-d-tiered-prefix-cache", func(t *testing.T) {
		// Full size (4 runs of 450 requests from 45 closed-loop clients, seconds). Published,
		// 30k prompt: the CPU tier lowers mean TTFT and E2E and raises throughput by 21.1%;
		// 8k prompt (fits in HBM): no change. The figures held within 25% below are those
		// docs/fidelity.md marks ✓ and this test asserts; the mean TTFT gain (−43% against
		// −25%) is held to its direction only.
		runs := fidelityRun(t, "llm-d-tiered-prefix-cache.yaml")
		run := func(tier, prompt string) string {
			return "precise-prefix/kv_offloading_size=" + tier + ",system_prompt_tokens=" + prompt
		}
		off, on := run("0", "30000"), run("160", "30000")
		for _, k := range []string{"ttft_ms", "e2e_ms"} {
			if a, b := metric(t, runs, on, k, "mean"), metric(t, runs, off, k, "mean"); a >= b {
				t.Errorf("30k prompt, mean %s: %.0f with the tier, %.0f without; published lower with", k, a, b)
			}
			if a, b := metric(t, runs, run("160", "8000"), k, "mean"), metric(t, runs, run("0", "8000"), k, "mean"); a > 1.1*b || a < 0.9*b {
				t.Errorf("8k prompt, mean %s: %.0f with the tier, %.0f without; published no change", k, a, b)
			}
		}
		within := func(what string, got, want float64) {
			if got < 0.75*want || got > 1.25*want {
				t.Errorf("%s %.0f, published %.0f (±25%%)", what, got, want)
			}
		}
		within("30k prompt with the tier, mean TTFT ms", metric(t, runs, on, "ttft_ms", "mean"), 6700)
		within("30k prompt without the tier, mean TTFT ms", metric(t, runs, off, "ttft_ms", "mean"), 9000)
		within("30k prompt with the tier, p90 TTFT ms", metric(t, runs, on, "ttft_ms", "p90"), 15900)
		within("30k prompt without the tier, p90 TTFT ms", metric(t, runs, off, "ttft_ms", "p90"), 20900)
		within("30k prompt with the tier, mean E2E ms", metric(t, runs, on, "e2e_ms", "mean"), 31000)
		within("30k prompt without the tier, mean E2E ms", metric(t, runs, off, "e2e_ms", "mean"), 37800)
		within("30k prompt with the tier, total tok/s", totalTokS(t, runs, on), 46663)
		within("30k prompt without the tier, total tok/s", totalTokS(t, runs, off), 38535)
		within("30k prompt, the tier's throughput gain in %", 100*(totalTokS(t, runs, on)/totalTokS(t, runs, off)-1), 21.1)
		within("8k prompt without the tier, mean E2E ms", metric(t, runs, run("0", "8000"), "e2e_ms", "mean"), 18400)
		within("8k prompt without the tier, total tok/s", totalTokS(t, runs, run("0", "8000")), 23390)
	})
	t.Run("kubeai", func(t *testing.T) {
		// Full size (8,000 requests, about a second a policy); round-robin is left out (its
		// alignment with the cycled prompt list makes it a prompt-affinity router).
		runs := fidelityRun(t, "kubeai-prefix-hash.yaml", "\n  chwbl, round-robin,\n  lmetric, kv-router, token-load, predicted-ttft]", "]")
		const chwbl = "chwbl,prefix_char_length=100,variant=kubeai-v0.21.0,virtual_nodes_per_replica=256" // KubeAI's PrefixHash
		for _, blind := range []string{"random", "least-request"} {
			if c, b := metric(t, runs, chwbl, "ttft_ms", "mean"), metric(t, runs, blind, "ttft_ms", "mean"); c >= b {
				t.Errorf("mean TTFT: chwbl %.0f ms, %s %.0f ms; published PrefixHash 280 < 817 and 1,320", c, blind, b)
			}
			if c, b := totalTokS(t, runs, chwbl), totalTokS(t, runs, blind); c <= b {
				t.Errorf("total tok/s: chwbl %.0f, %s %.0f; published 69.4k > 45.9k and 45.4k", c, blind, b)
			}
			if c, b := metric(t, runs, chwbl, "hit_rate"), metric(t, runs, blind, "hit_rate"); c <= b {
				t.Errorf("hit rate: chwbl %.3f, %s %.3f; PrefixHash keeps a conversation on one replica", c, blind, b)
			}
		}
	})
}

// llmdLadder and llmdPolicies are the parts of llm-d-kv-cache-wins.yaml the test reduces.
const (
	llmdLadder = "    - {rate: 15, duration: 50s, warmup: true}\n    - {rate: 3, duration: 20s}\n" +
		"    - {rate: 10, duration: 20s}\n    - {rate: 15, duration: 20s}\n    - {rate: 20, duration: 38s}\n" +
		"    - {rate: 22, duration: 34s}\n    - {rate: 25, duration: 30s}\n    - {rate: 30, duration: 25s}\n" +
		"    - {rate: 35, duration: 21s}\n    - {rate: 40, duration: 38s}\n    - {rate: 43, duration: 36s}\n" +
		"    - {rate: 46, duration: 33s}\n    - {rate: 49, duration: 30s}\n    - {rate: 52, duration: 29s}\n" +
		"    - {rate: 55, duration: 27s}\n    - {rate: 57, duration: 26s}\n    - {rate: 60, duration: 25s}\n"
	llmdPolicies = "  - {name: precise-prefix, prefix_weight: 3, kv_cache_weight: 2, queue_weight: 2}\n  - precise-prefix\n" +
		"  - {name: precise-prefix, speculative_indexing: true}\n" +
		"  - {name: prefix-score, prefix_weight: 1, kv_cache_weight: 1, queue_weight: 1, auto_tune: false}\n" +
		"  - prefix-score\n  - {name: prefix-score, prefix_weight: 0, kv_cache_weight: 1, queue_weight: 1}\n" +
		"  - least-kv-cache\n  - random\n  - lmetric\n  - kv-router\n  - token-load\n  - predicted-ttft"
)
