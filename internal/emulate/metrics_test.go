package emulate

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"kvroute/internal/vllm"
	"kvroute/sim/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func scrape(t *testing.T, base string) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	resp, err := client().Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the page does not parse: %v\n%s", err, b)
	}
	return fams, b
}

// value returns the single sample of a gauge or counter family.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil || len(f.Metric) != 1 {
		t.Fatalf("%s: want one sample, got %v", name, f)
	}
	m := f.Metric[0]
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("%s: unexpected type %v", name, f.GetType())
	return 0
}

func TestMetricsPage(t *testing.T) {
	_, base := startReplica(t, func(c *Config) { c.ServedModelName = "served" })
	before, _ := scrape(t, base)
	types := map[string]dto.MetricType{
		"vllm:num_requests_running": dto.MetricType_GAUGE, "vllm:num_requests_waiting": dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc": dto.MetricType_GAUGE, "vllm:cache_config_info": dto.MetricType_GAUGE,
		"vllm:prefix_cache_queries_total": dto.MetricType_COUNTER, "vllm:prefix_cache_hits_total": dto.MetricType_COUNTER,
		"vllm:num_preemptions_total": dto.MetricType_COUNTER, "vllm:prompt_tokens_total": dto.MetricType_COUNTER,
		"vllm:generation_tokens_total": dto.MetricType_COUNTER, "vllm:request_success_total": dto.MetricType_COUNTER,
		"vllm:time_to_first_token_seconds": dto.MetricType_HISTOGRAM, "vllm:e2e_request_latency_seconds": dto.MetricType_HISTOGRAM,
	}
	for name, typ := range types {
		f := before[name]
		if f == nil {
			t.Errorf("%s missing", name)
			continue
		}
		if f.GetType() != typ || f.GetHelp() == "" {
			t.Errorf("%s: type %v, help %q; want %v with help", name, f.GetType(), f.GetHelp(), typ)
		}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["engine"] != "0" || (name != "vllm:cache_config_info" && labels["model_name"] != "served") {
				t.Errorf("%s: labels %v", name, labels)
			}
		}
	}
	checkBuckets(t, before["vllm:time_to_first_token_seconds"], ttftBuckets)
	checkBuckets(t, before["vllm:e2e_request_latency_seconds"], e2eBuckets)

	const prompt, out = 200, 9
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d}`, strings.Repeat("wxyz", prompt), out)
	for range 2 {
		readCompletion(t, post(t, client(), base+"/v1/completions", body))
	}
	after, page := scrape(t, base)
	hit := float64((prompt - 1) / 16 * 16)
	for _, tc := range []struct {
		name  string
		delta float64
	}{
		{"vllm:prompt_tokens_total", 2 * prompt}, {"vllm:generation_tokens_total", 2 * out},
		{"vllm:prefix_cache_queries_total", 2 * prompt}, {"vllm:prefix_cache_hits_total", hit},
		{"vllm:request_success_total", 2}, {"vllm:time_to_first_token_seconds", 2},
		{"vllm:e2e_request_latency_seconds", 2}, {"vllm:num_requests_running", 0},
	} {
		if got := value(t, after, tc.name) - value(t, before, tc.name); got != tc.delta {
			t.Errorf("%s moved by %v, want %v", tc.name, got, tc.delta)
		}
	}
	engines, err := vllm.ParseEngines(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(engines) != 1 || engines[0].Model != "served" || engines[0].BlockSize != 16 || engines[0].NumGPUBlocks < 1000 ||
		engines[0].PrefixCacheHits != hit {
		t.Errorf("internal/vllm reads %+v", engines)
	}
}

func checkBuckets(t *testing.T, f *dto.MetricFamily, want []float64) {
	t.Helper()
	var got []float64
	for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
		got = append(got, b.GetUpperBound())
	}
	if want = append(slices.Clone(want), math.Inf(1)); !slices.Equal(got, want) {
		t.Errorf("%s buckets %v, want %v", f.GetName(), got, want)
	}
}

// TestMetricsGolden pins the page's exact text for a fixed snapshot.
func TestMetricsGolden(t *testing.T) {
	s := snapshot{
		Metrics: engine.Metrics{Running: 3, Waiting: 1, KVUsage: 0.25, NumGPUBlocks: 1000, BlockSize: 16,
			PrefixQueries: 5000, PrefixHits: 2048, Preemptions: 2, PromptTokens: 5000, GenerationTokens: 640, Completed: 4},
		TTFT: newHistogram(ttftBuckets), E2E: newHistogram(e2eBuckets), Phases: newPhaseHists(), Success: 4,
	}
	for _, v := range []float64{1, 300, 20000} {
		s.Phases.iter.observe(v)
	}
	for _, v := range []float64{0.012, 0.5, 100} {
		s.Phases.tpot.observe(v)
		s.Phases.queue.observe(v)
		s.Phases.prefill.observe(2 * v)
		s.Phases.decode.observe(3 * v)
		s.Phases.inference.observe(5 * v)
	}
	for _, v := range []float64{0.0005, 0.02, 0.3, 3000} {
		s.TTFT.observe(v)
	}
	for _, v := range []float64{0.3, 1.2, 8000} {
		s.E2E.observe(v)
	}
	var b bytes.Buffer
	if err := writeMetrics(&b, `llama "8b"`, s, 0.9, true); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "metrics.golden", b.Bytes())
}

func TestPyFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{{0, "0.0"}, {1, "1.0"}, {2560, "2560.0"}, {0.001, "0.001"}, {0.25, "0.25"}, {1e21, "1e+21"}} {
		if got := pyFloat(tc.in); got != tc.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
