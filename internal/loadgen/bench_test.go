package loadgen

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/results"
)

func TestBenchJSON(t *testing.T) {
	ms := time.Millisecond
	done := func(id string, arr, first, finish time.Duration, out int, itl ...time.Duration) *Result {
		return &Result{Record: results.Record{ID: id, Status: results.StatusCompleted, Arrival: arr, FirstToken: first,
			Finish: finish, PromptTokens: 100, OutputTokens: out}, ITL: itl, Text: "x"}
	}
	b := NewBench(BenchInfo{Backend: "openai-chat", Label: "live", RequestRate: 2, Burstiness: 1, SLO: results.SLO{TTFTMs: 150}})
	b.Add(done("a", 0, 100*ms, 300*ms, 3, 100*ms, 100*ms))
	b.Add(done("b", 500*ms, 700*ms, 1000*ms, 4, 100*ms, 100*ms, 100*ms))
	b.Add(&Result{Record: results.Record{ID: "c", Status: results.StatusFailed, Error: "http 500: boom", Arrival: ms, Finish: 2 * ms, PromptTokens: 50}})
	b.Add(&Result{Warmup: true, Record: results.Record{ID: "w", Status: results.StatusCompleted}})
	var buf bytes.Buffer
	if err := b.WriteJSON(&buf, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"completed": 2.0, "failed": 1.0, "num_prompts": 3.0, "duration": 2.0, "total_input_tokens": 200.0, "total_output_tokens": 7.0,
		"request_throughput": 1.0, "output_throughput": 3.5, "request_goodput": 0.5, "max_concurrency": nil,
		"input_lens": []any{100.0, 100.0, 50.0}, "output_lens": []any{3.0, 4.0, 0.0},
		"ttfts": []any{0.1, 0.2, 0.0}, "latencies": []any{0.3, 0.5, 0.0},
		"itls":         []any{[]any{0.1, 0.1}, []any{0.1, 0.1, 0.1}, []any{}},
		"errors":       []any{"", "", "http 500: boom"},
		"mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "p99_ttft_ms": 199.0, "p50_ttft_ms": 150.0,
		"mean_tpot_ms": 100.0, "mean_itl_ms": 100.0, "mean_e2el_ms": 400.0, "std_e2el_ms": 100.0, "p90_e2el_ms": 480.0,
	}
	sub := map[string]any{}
	for k := range want {
		sub[k] = got[k]
	}
	approx := cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(x)) })
	if diff := cmp.Diff(want, sub, approx); diff != "" {
		t.Errorf("bench json (-want +got):\n%s", diff)
	}
	for _, k := range []string{"std_ttft_ms", "p95_itl_ms", "median_tpot_ms", "generated_texts", "start_times", "request_rate", "date"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing key %s", k)
		}
	}
}
