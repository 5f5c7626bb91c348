package gpumodel

import (
	"math"
	"testing"
	"time"
)

// TestFP8KVCapacity recomputes by hand the KV capacity of Llama-3.1-8B-FP8 on one L4: the
// 32 blocks' linear weights (218,103,808 each) at one byte, the other 1,050,939,392
// parameters at two, with vLLM's defaults and with the KubeAI benchmark's arguments
// (--gpu-memory-utilization 0.95 --max-num-batched-tokens 16384 --kv-cache-dtype fp8).
func TestFP8KVCapacity(t *testing.T) {
	const linear, rest = 32 * 218_103_808, 8_030_261_248 - 32*218_103_808
	weights := int64(linear + 2*rest)
	if got := Llama31x8BFP8().WeightBytes(); got != weights || math.Abs(float64(got)/9.08e9-1) > 0.001 {
		t.Fatalf("FP8 weights %d bytes, want %d (the checkpoint's 9.08 GB)", got, weights)
	}
	mem := gib(22.06)
	tests := []struct {
		name       string
		util       float64
		tokens     int   // max_num_batched_tokens
		kvBytes    int64 // KV element size
		wantBlocks int
	}{
		// 0.9·mem − weights − (2048·59,392·2 + 3·256·128,256·4) − 0.15 GiB, over 2 MiB blocks.
		{"vLLM defaults, BF16 KV", 0.9, 2048, 2, 5453},
		{"KubeAI args, FP8 KV", 0.95, 16384, 1, 10413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DefaultDeployment(L4(), Llama31x8BFP8(), 1)
			d.MemoryUtilization, d.MaxNumBatchedTokens, d.KVDTypeBytes = tc.util, tc.tokens, int(tc.kvBytes)
			d.ActivationReserveBytes = EstimateActivationReserve(d.Model, 1, tc.tokens, d.MaxNumSeqs)
			reserve := int64(tc.tokens)*(3*14336+4*4096)*2 + 3*256*128_256*4
			avail := int64(math.Floor(tc.util*float64(mem))) - weights - reserve - gib(0.15)
			want := int(avail / (2 * 32 * 8 * 128 * tc.kvBytes * 16))
			if want != tc.wantBlocks {
				t.Fatalf("hand computation %d blocks, table says %d", want, tc.wantBlocks)
			}
			if got := d.KVBlocks(); got != want {
				t.Errorf("KVBlocks = %d, want %d", got, want)
			}
		})
	}
	bf16 := DefaultDeployment(L4(), Llama31x8B(), 1)
	if got, was := DefaultDeployment(L4(), Llama31x8BFP8(), 1).KVBlocks(), bf16.KVBlocks(); got < 2*was {
		t.Errorf("FP8 weights give %d blocks on L4, want more than twice BF16's %d", got, was)
	}
}

// TestKVCapacityAgainstVLLM compares the KV sizing with a capacity vLLM reported. KubeAI's
// sample of a real vLLM /metrics page (substratusai/kubeai hack/vllm-mock-metrics/metrics.txt,
// August 2024, V0 engine) carries vllm:cache_config_info{num_gpu_blocks="4574"} for
// neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8 with gpu_memory_utilization 0.9 and BF16 KV
// (cache_dtype auto; 2,048 CPU blocks = 4 GiB of swap at 2 MiB per block): the labels of the
// repository's catalog entry of the time, llama-3.1-8b-instruct-fp8-l4 on one L4 with
// --max-model-len 16384 --max-num-batched-token 16384 --gpu-memory-utilization 0.9.
func TestKVCapacityAgainstVLLM(t *testing.T) {
	const published = 4574
	d := DefaultDeployment(L4(), Llama31x8BFP8(), 1)
	d.MemoryUtilization, d.MaxNumBatchedTokens = 0.9, 16384
	d.ActivationReserveBytes = EstimateActivationReserve(d.Model, 1, d.MaxNumBatchedTokens, d.MaxNumSeqs)
	got := d.KVBlocks()
	if math.Abs(float64(got)/published-1) > 0.03 {
		t.Fatalf("KVBlocks = %d, vLLM reported %d: off by more than 3%%", got, published)
	}
	t.Logf("KVBlocks = %d against vLLM's %d (%+.1f%%)", got, published, 100*(float64(got)/published-1))
}

// TestFP8StepTime checks what FP8 weights change: on L4 (FP8 tensor cores) a long prefill,
// compute-bound, runs at close to twice the speed; on A100 (weight-only FP8) the same prefill
// costs what BF16 does, while a small decode step, bound by the weight stream, gets faster
// on both.
func TestFP8StepTime(t *testing.T) {
	prefill := NewStep([]Chunk{{Tokens: 2048}}, nil)
	decode := NewStep(nil, []int{1000})
	tests := []struct {
		name               string
		gpu                GPU
		prefillLo, prefHi  float64 // BF16 time / FP8 time
		decodeLo, decodeHi float64
	}{
		{"L4 W8A8", L4(), 1.6, 2.0, 1.3, 2.0},
		{"H100 W8A8", H100SXM80GB(), 1.4, 2.0, 1.1, 2.0},
		{"A100 W8A16", A100SXM80GB(), 0.98, 1.1, 1.1, 2.0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bf, err := NewPricer(DefaultDeployment(tc.gpu, Llama31x8B(), 1))
			if err != nil {
				t.Fatal(err)
			}
			fp, err := NewPricer(DefaultDeployment(tc.gpu, Llama31x8BFP8(), 1))
			if err != nil {
				t.Fatal(err)
			}
			ratio := func(s Step) float64 { return float64(bf.StepTime(s)) / float64(fp.StepTime(s)) }
			if r := ratio(prefill); r < tc.prefillLo || r > tc.prefHi {
				t.Errorf("prefill 2048: BF16/FP8 = %.2f, want %.2f..%.2f", r, tc.prefillLo, tc.prefHi)
			}
			if r := ratio(decode); r < tc.decodeLo || r > tc.decodeHi {
				t.Errorf("decode 1: BF16/FP8 = %.2f, want %.2f..%.2f", r, tc.decodeLo, tc.decodeHi)
			}
		})
	}
	// The hard lower bound on L4: 2,048 tokens at the 242 TFLOP/s
	// FP8 peak take about 138 ms with attention and the LM head.
	p, err := NewPricer(DefaultDeployment(L4(), Llama31x8BFP8(), 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.FLOPFloor(prefill); got < 110*time.Millisecond || got > 140*time.Millisecond {
		t.Errorf("L4 FP8 prefill 2048 FLOP floor %v, want 110..140 ms", got)
	}
}

func TestParseQuantization(t *testing.T) {
	tests := []struct {
		in      string
		want    Quantization
		wantErr bool
	}{
		{"", QuantNone, false}, {"none", QuantNone, false}, {"auto", QuantNone, false},
		{"FP8", QuantFP8, false}, {" fp8 ", QuantFP8, false}, {"int4", QuantNone, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseQuantization(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseQuantization(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
