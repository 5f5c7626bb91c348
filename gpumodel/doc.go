// Package gpumodel prices LLM inference on GPUs: how many KV-cache blocks a
// vLLM replica has, and how long one scheduler step takes. It is the clock of
// the simulator (sim/engine asks it once per step) and imports only the
// standard library.
//
// The catalog holds value types: GPUs (A100-40GB-SXM, A100-80GB-SXM,
// H100-SXM-80GB, H100-PCIe-80GB, H200-SXM-141GB, L40S, L4) and models (Llama-3.1-8B,
// Llama-3.1-70B, Qwen2.5-7B, Mistral-7B, Llama-2-7B, Llama-2-13B, Llama-2-70B, Qwen3-14B, Qwen3-32B,
// Llama-3.1-8B-FP8, and the mixtures of experts gpt-oss-120b and gpt-oss-20b, whose
// sliding-window layers hold a bounded window per request: moe.go),
// returned by preset functions such as H100SXM80GB and found by name or alias
// with LookupGPU and LookupModel. LoadCatalog adds a user's GPUs and models
// from a strictly decoded JSON file (cmd/ converts YAML to JSON first).
//
// A Deployment is one replica: a model on TP GPUs with vLLM's engine settings
// (DefaultDeployment fills in vLLM's defaults). Its KV capacity is
//
//	(gpu_memory_utilization × GPU memory − weights/TP − activation reserve − non-torch memory)
//	÷ (2 × full-attention layers × KV heads/TP × head dim × KV dtype bytes), in 16-token blocks.
//
// GPU.NICGbps and Deployment.KVTransferBytes price the KV transfers of a
// prefill/decode fleet.
//
// A Step is the aggregate work of one scheduler step: prefill chunks (each
// with the cached context it attends to) and decoding sequences (each with its
// context length). NewPricer folds a Deployment into constants so that
// Pricer.StepTime costs tens of nanoseconds and allocates nothing. The price is a
// smooth roofline of prefill compute against weight and KV traffic, plus the
// unhidden math of decode tokens, tensor-parallel all-reduce, and fixed
// per-step, per-layer and per-request overheads. Attention work grows with
// context length, so a prefix-cache hit is worth what it saves.
//
// Physical floors hold by construction: no step is priced below its FLOP floor
// (FLOPs at peak FLOP/s, Pricer.FLOPFloor) or its memory floor (bytes at peak
// bandwidth, Pricer.MemoryFloor). The efficiencies are calibrated against
// published measurements in testdata/calibration.json; README.md has the
// predicted-versus-measured table.
package gpumodel
