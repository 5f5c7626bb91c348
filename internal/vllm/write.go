package vllm

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Write writes engines as a vLLM V1 metrics page in the Prometheus text format: HELP and TYPE
// lines, then one sample per engine labelled with model_name and engine, for the gauges and
// counters Parse reads plus vllm:cache_config_info when an engine knows its block count.
// ParseEngines reads the page back into the same engines (sorted).
func Write(w io.Writer, engines []Engine) error {
	bw := bufio.NewWriter(w)
	families := []struct {
		name, typ, help string
		value           func(Engine) float64
	}{
		{NameRunning, "gauge", "Number of requests in model execution batches.", func(e Engine) float64 { return float64(e.Running) }},
		{NameWaiting, "gauge", "Number of requests waiting to be processed.", func(e Engine) float64 { return float64(e.Waiting) }},
		{NameKVUsage, "gauge", "KV-cache usage. 1 means 100 percent usage.", func(e Engine) float64 { return e.KVUsage }},
		{NamePrefixQueries, "counter", "Prefix cache queries, in terms of number of queried tokens.", func(e Engine) float64 { return e.PrefixCacheQueries }},
		{NamePrefixHits, "counter", "Prefix cache hits, in terms of number of cached tokens.", func(e Engine) float64 { return e.PrefixCacheHits }},
	}
	for _, f := range families {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for _, e := range engines {
			fmt.Fprintf(bw, "%s{engine=\"%d\",model_name=\"%s\"} %s\n", f.name, e.Index, escape(e.Model), formatFloat(f.value(e)))
		}
	}
	writeCacheConfig(bw, engines)
	return bw.Flush()
}

// writeCacheConfig writes the info gauge, once per engine index, for engines with a known
// block count (vLLM labels it with the cache configuration and the engine, not the model).
func writeCacheConfig(bw *bufio.Writer, engines []Engine) {
	done := map[int]bool{}
	header := false
	for _, e := range engines {
		if e.NumGPUBlocks <= 0 || done[e.Index] {
			continue
		}
		if !header {
			fmt.Fprintf(bw, "# HELP %s Information of the LLMEngine CacheConfig\n# TYPE %s gauge\n", NameCacheConfig, NameCacheConfig)
			header = true
		}
		done[e.Index] = true
		fmt.Fprintf(bw, "%s{block_size=\"%d\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",engine=\"%d\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"%d\"} 1.0\n",
			NameCacheConfig, e.BlockSize, e.Index, e.NumGPUBlocks)
	}
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escape(s string) string { return labelEscaper.Replace(s) }

// formatFloat writes v the way Prometheus clients do, so that it parses back exactly.
func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}
