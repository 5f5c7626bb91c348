package emulate

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ttftBuckets are vLLM's vllm:time_to_first_token_seconds bucket bounds, in seconds.
var ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}

// e2eBuckets are vLLM's request-latency bucket bounds (vllm:e2e_request_latency_seconds), in
// seconds.
var e2eBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60,
	120, 240, 480, 960, 1920, 7680}

// histogram is a Prometheus histogram: counts per bucket (not cumulative), the last one +Inf.
type histogram struct {
	bounds []float64 // shared, never modified
	counts []uint64
	sum    float64
	count  uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// observe adds one sample v, in seconds.
func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // the first bound >= v: Prometheus buckets are le
	h.counts[i]++
	h.sum += v
	h.count++
}

func (h histogram) clone() histogram {
	h.counts = slices.Clone(h.counts)
	return h
}

// exposition writes a snapshot as vLLM's /metrics page: the Prometheus text format, HELP and
// TYPE lines, labels model_name and engine="0", floats the way Python's client writes them.
type exposition struct {
	w      *bufio.Writer
	labels string // `engine="0",model_name="..."`
}

func writeMetrics(w io.Writer, model string, s snapshot, gpuMemoryUtilization float64, blocksOverridden bool) error {
	e := exposition{w: bufio.NewWriter(w), labels: `engine="0",model_name="` + escapeLabel(model) + `"`}
	e.sample("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", float64(s.Running))
	e.sample("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", float64(s.Waiting))
	e.sample("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", s.KVUsage)
	e.sample("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", float64(s.PrefixQueries))
	e.sample("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", float64(s.PrefixHits))
	e.sample("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", float64(s.Preemptions))
	e.sample("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", float64(s.PromptTokens))
	e.sample("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", float64(s.GenerationTokens))
	e.header("vllm:request_success_total", "counter", "Count of successfully processed requests.")
	fmt.Fprintf(e.w, "vllm:request_success_total{%s,finished_reason=\"length\"} %s\n", e.labels, pyFloat(float64(s.Success)))
	e.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", s.Phases.iter)
	e.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.TTFT)
	e.writePhases(s.Phases)
	e.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.E2E)
	e.writeRequestPhases(s.Phases)
	cpuBlocks := 0
	if s.Offload != nil {
		e.writeOffload(s)
		cpuBlocks = s.Offload.cpuBlocks
	}
	override := "None"
	if blocksOverridden {
		override = strconv.Itoa(s.NumGPUBlocks)
	}
	e.header("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
	fmt.Fprintf(e.w, "vllm:cache_config_info{block_size=\"%d\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",engine=\"0\","+
		"gpu_memory_utilization=\"%s\",num_cpu_blocks=\"%d\",num_gpu_blocks=\"%d\",num_gpu_blocks_override=\"%s\"} 1.0\n",
		s.BlockSize, pyFloat(gpuMemoryUtilization), cpuBlocks, s.NumGPUBlocks, override)
	return e.w.Flush()
}

func (e exposition) header(name, typ, help string) {
	fmt.Fprintf(e.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (e exposition) sample(name, typ, help string, v float64) {
	e.header(name, typ, help)
	fmt.Fprintf(e.w, "%s{%s} %s\n", name, e.labels, pyFloat(v))
}

func (e exposition) histogram(name, help string, h histogram) {
	e.header(name, "histogram", help)
	e.histogramRows(name, e.labels, h)
}

// histogramRows writes h's bucket, count and sum rows with labels.
func (e exposition) histogramRows(name, labels string, h histogram) {
	var cum uint64
	for i, c := range h.counts {
		cum += c
		le := "+Inf"
		if i < len(h.bounds) {
			le = pyFloat(h.bounds[i])
		}
		fmt.Fprintf(e.w, "%s_bucket{%s,le=\"%s\"} %s\n", name, labels, le, pyFloat(float64(cum)))
	}
	fmt.Fprintf(e.w, "%s_count{%s} %s\n", name, labels, pyFloat(float64(h.count)))
	fmt.Fprintf(e.w, "%s_sum{%s} %s\n", name, labels, pyFloat(h.sum))
}

// pyFloat formats v as Python's prometheus_client does: integers with a trailing ".0".
func pyFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
