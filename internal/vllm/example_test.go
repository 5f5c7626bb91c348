package vllm_test

import (
	"fmt"
	"strings"

	"kvroute/internal/vllm"
)

func Example() {
	page := `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama-3.1-8b"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama-3.1-8b"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama-3.1-8b"} 0.42
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="27000"} 1.0
`
	m, err := vllm.Parse(strings.NewReader(page))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("running=%d waiting=%d kv=%.2f blocks=%d models=%v\n", m.Running, m.Waiting, m.KVUsage, m.NumGPUBlocks, m.Models)
	// Output: running=3 waiting=1 kv=0.42 blocks=27000 models=[llama-3.1-8b]
}
