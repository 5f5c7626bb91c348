package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"kvroute/internal/vllm"
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

// MetricsFile is the name of the file in a results directory that holds the servers'
// histogram deltas (WriteMetricsFile).
const MetricsFile = "vllm-metrics.json"

// Bucket is one cumulative histogram bucket: its upper bound as Prometheus writes it ("+Inf"
// for the last) and the observations at or below it.
type Bucket struct {
	LE    string  `json:"le"`
	Count float64 `json:"count"`
}

// HistogramDelta is a histogram's increase between two readings: cumulative buckets, the sum
// (seconds or tokens) and the count of the observations made in between.
type HistogramDelta struct {
	Buckets []Bucket `json:"buckets"`
	Sum     float64  `json:"sum"`
	Count   float64  `json:"count"`
}

// ServerHistograms are one server's histogram deltas over a run. Absent lists, sorted, the
// HistogramNames the server's page lacked in either reading (every name when the page was
// not a vLLM one or could not be read).
type ServerHistograms struct {
	URL        string                    `json:"url"`
	Histograms map[string]HistogramDelta `json:"histograms"`
	Absent     []string                  `json:"absent,omitempty"`
}

// RunHistograms are one run's server histograms, in the order of the URLs scraped.
type RunHistograms struct {
	Run     string             `json:"run"`
	Servers []ServerHistograms `json:"servers"`
}

// HistogramDeltas returns, per URL of after (in its order), the increase of each histogram
// from before. A histogram whose count went down (the server restarted) counts from zero; one
// whose buckets changed between the readings is absent.
func HistogramDeltas(before, after []Counters) []ServerHistograms {
	prev := map[string]Counters{}
	for _, c := range before {
		prev[c.URL] = c
	}
	out := make([]ServerHistograms, 0, len(after))
	for _, a := range after {
		s := ServerHistograms{URL: a.URL, Histograms: map[string]HistogramDelta{}}
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
func delta(a, b vllm.Histogram) HistogramDelta {
	if b.Count < a.Count {
		a = vllm.Histogram{Counts: make([]float64, len(b.Counts))}
	}
	d := HistogramDelta{Sum: b.Sum - a.Sum, Count: b.Count - a.Count, Buckets: make([]Bucket, len(b.Bounds))}
	for i, le := range b.Bounds {
		d.Buckets[i] = Bucket{LE: formatLE(le), Count: max(b.Counts[i]-a.Counts[i], 0)}
	}
	return d
}

func formatLE(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// WriteMetricsFile writes runs as vllm-metrics.json: {"runs": [{"run", "servers": [{"url",
// "histograms": {name: {"buckets": [{"le", "count"}], "sum", "count"}}, "absent"}]}]}, keys
// of histograms sorted, indented, so equal inputs give equal bytes.
func WriteMetricsFile(w io.Writer, runs []RunHistograms) error {
	if runs == nil {
		runs = []RunHistograms{}
	}
	b, err := json.MarshalIndent(struct {
		Runs []RunHistograms `json:"runs"`
	}{runs}, "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: %s: %w", MetricsFile, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("loadgen: %s: %w", MetricsFile, err)
	}
	return nil
}
