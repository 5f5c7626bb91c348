// Package vllm reads and writes the part of a vLLM server's Prometheus /metrics page that
// routing needs: running and waiting request counts, KV-cache usage, KV capacity in blocks and
// the prefix-cache counters, per engine (data-parallel rank) and aggregated per server.
//
// Parse reads the Prometheus text exposition format with the Prometheus text parser. It knows
// vLLM V1 names (vllm:kv_cache_usage_perc), the pre-0.9 name vllm:gpu_cache_usage_perc, and the
// equivalent SGLang gauges. Write produces the same format, for emulated servers and tests.
package vllm
