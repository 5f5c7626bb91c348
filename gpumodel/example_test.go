package gpumodel_test

import (
	"fmt"

	"kvroute/gpumodel"
)

// Example sizes a Llama-3.1-8B replica on one H100 and prices a prefill with
// and without a prefix-cache hit, and a decode step.
func Example() {
	gpu, err := gpumodel.LookupGPU("h100")
	if err != nil {
		fmt.Println(err)
		return
	}
	model, err := gpumodel.LookupModel("meta-llama/Llama-3.1-8B-Instruct")
	if err != nil {
		fmt.Println(err)
		return
	}
	d := gpumodel.DefaultDeployment(gpu, model, 1)
	p, err := gpumodel.NewPricer(d)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s on %s: %d KV blocks (%d tokens), max_num_batched_tokens %d, max_num_seqs %d\n",
		model.Name, gpu.Name, d.KVBlocks(), d.KVCapacityTokens(), d.MaxNumBatchedTokens, d.MaxNumSeqs)

	var cold, warm, decode gpumodel.Step
	cold.AddPrefill(4096, 0)   // a 4,096-token prompt, nothing cached
	warm.AddPrefill(256, 3840) // the same prompt with 3,840 tokens hit in the prefix cache
	for range 32 {
		decode.AddDecode(2000) // 32 sequences, 2,000 tokens of context each
	}
	fmt.Println("cold prefill:", p.StepTime(cold).Round(100_000))
	fmt.Println("warm prefill:", p.StepTime(warm).Round(100_000))
	fmt.Println("decode x32:  ", p.StepTime(decode).Round(100_000))
	// Output:
	// Llama-3.1-8B on H100-SXM-80GB: 27553 KV blocks (440848 tokens), max_num_batched_tokens 8192, max_num_seqs 1024
	// cold prefill: 126.4ms
	// warm prefill: 12.2ms
	// decode x32:   9.8ms
}
