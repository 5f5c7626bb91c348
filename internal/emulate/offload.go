package emulate

import (
	"fmt"
	"time"
)

// offloadSizeBuckets are vllm:kv_offload_size's bucket bounds, in bytes
// (vllm-project/vllm@d1db1e8c vllm/distributed/kv_transfer/kv_connector/v1/offloading/
// metrics.py, OffloadPromMetrics).
var offloadSizeBuckets = []float64{1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6, 100e6, 150e6, 200e6}

// offloadStats is what a replica's CPU tier adds to /metrics: the tier's size and the sizes
// of its copies, each way.
type offloadStats struct {
	cpuBlocks   int
	store, load histogram // bytes per copy: GPU_to_CPU, CPU_to_GPU
}

// transfer records one copy that ended (engine.Hooks.Transfer).
func (o *offloadStats) transfer(toCPU bool, bytes int64, _ time.Duration) {
	if toCPU {
		o.store.observe(float64(bytes))
	} else {
		o.load.observe(float64(bytes))
	}
}

// writeOffload writes vLLM's CPU-tier metrics: the connector's prefix-cache counters
// (vllm:external_prefix_cache_queries and _hits) and the offloading connector's
// (vllm:kv_offload_total_bytes, vllm:kv_offload_total_time, vllm:kv_offload_size), each
// labelled by transfer_type GPU_to_CPU or CPU_to_GPU. Counters carry the _total suffix
// Python's prometheus_client adds.
func (e exposition) writeOffload(s snapshot) {
	e.sample("vllm:external_prefix_cache_queries_total", "counter",
		"External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.", float64(s.ExternalQueries))
	e.sample("vllm:external_prefix_cache_hits_total", "counter",
		"External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.", float64(s.ExternalHits))
	type way struct {
		label string
		bytes int64
		time  time.Duration
		sizes histogram
	}
	ways := []way{
		{"GPU_to_CPU", s.OffloadStoreBytes, s.OffloadStoreTime, s.Offload.store},
		{"CPU_to_GPU", s.OffloadLoadBytes, s.OffloadLoadTime, s.Offload.load},
	}
	e.header("vllm:kv_offload_total_bytes_total", "counter", "Number of bytes offloaded by KV connector")
	for _, w := range ways {
		fmt.Fprintf(e.w, "vllm:kv_offload_total_bytes_total{%s,transfer_type=%q} %s\n", e.labels, w.label, pyFloat(float64(w.bytes)))
	}
	e.header("vllm:kv_offload_total_time_total", "counter", "Total time measured by all KV offloading operations")
	for _, w := range ways {
		fmt.Fprintf(e.w, "vllm:kv_offload_total_time_total{%s,transfer_type=%q} %s\n", e.labels, w.label, pyFloat(w.time.Seconds()))
	}
	e.header("vllm:kv_offload_size", "histogram", "Histogram of KV offload transfer size, in bytes.")
	for _, w := range ways {
		e.histogramRows("vllm:kv_offload_size", e.labels+`,transfer_type="`+w.label+`"`, w.sizes)
	}
}
