package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"kvroute/internal/vllm"
	"kvroute/results"
)

// HistogramNames are the vLLM V1 histograms Scrape records: the per-step token count and the
// per-token and per-request latencies a calibration compares with the simulator.
// vllm:inter_token_latency_seconds is the newer name of vllm:time_per_output_token_seconds.
var HistogramNames = []string{
	"vllm:iteration_tokens_total",
	"vllm:time_to_first_token_seconds",
	"vllm:time_per_output_token_seconds",
	"vllm:inter_token_latency_seconds",
	"vllm:e2e_request_latency_seconds",
	"vllm:request_queue_time_seconds",
	"vllm:request_inference_time_seconds",
	"vllm:request_prefill_time_seconds",
	"vllm:request_decode_time_seconds",
}

// HistogramDeltas returns, per URL of after (in its order), the increase of each histogram
// from before. A histogram whose count went down (the server restarted) counts from zero; one
// whose buckets changed between the readings is absent.
func HistogramDeltas(before, after []Counters) []results.ServerHistograms {
	prev := map[string]Counters{}
	for _, c := range before {
		prev[c.URL] = c
	}
	out := make([]results.ServerHistograms, 0, len(after))
	for _, a := range after {
		s := results.ServerHistograms{URL: a.URL, Histograms: map[string]results.HistogramDelta{}}
		b := prev[a.URL]
		for _, name := range HistogramNames {
			ha, okA := a.Histograms[name]
			hb, okB := b.Histograms[name]
			if !okA || !okB || !slices.Equal(ha.Bounds, hb.Bounds) {
				s.Absent = append(s.Absent, name)
				continue
			}
			s.Histograms[name] = delta(hb, ha)
		}
		slices.Sort(s.Absent)
		out = append(out, s)
	}
	return out
}

// delta is b − a, bucket by bucket, or b when a's count is larger (a reset).
func delta(a, b vllm.Histogram) results.HistogramDelta {
	if b.Count < a.Count {
		a = vllm.Histogram{Counts: make([]float64, len(b.Counts))}
	}
	d := results.HistogramDelta{Sum: b.Sum - a.Sum, Count: b.Count - a.Count, Buckets: make([]results.HistogramBucket, len(b.Bounds))}
	for i, le := range b.Bounds {
		d.Buckets[i] = results.HistogramBucket{LE: formatLE(le), Count: max(b.Counts[i]-a.Counts[i], 0)}
	}
	return d
}

func formatLE(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// WriteMetricsFile writes runs as a results directory's results.VLLMMetricsFile
// (results.VLLMMetrics), indented, keys of histograms sorted, so equal inputs give equal bytes.
func WriteMetricsFile(w io.Writer, runs []results.RunHistograms) error {
	if runs == nil {
		runs = []results.RunHistograms{}
	}
	b, err := json.MarshalIndent(results.VLLMMetrics{Runs: runs}, "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: %s: %w", results.VLLMMetricsFile, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("loadgen: %s: %w", results.VLLMMetricsFile, err)
	}
	return nil
}
