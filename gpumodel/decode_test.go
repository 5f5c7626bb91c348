package gpumodel

import (
	"fmt"
	"testing"
	"time"
)

// TestDecodeInsideRoofline checks that decode math shares the roofline with the memory
// stream (issue 17) instead of being added to it: a lone sequence costs its memory time, and
// a saturated batch, whose math is as long as its memory traffic, costs well under their sum
// (2^(1/1.5) = 1.59× the larger at the ridge, against 2× when added) and never less than the
// larger of the two.
func TestDecodeInsideRoofline(t *testing.T) {
	for _, c := range []struct {
		gpu, model string
		tp         int
		seqs, ctx  int
		maxOfSum   float64 // GPU time over (memory + decode compute) must be below this
	}{
		{"H100", "Llama-3.1-8B", 1, 1, 300, 1.0},
		{"H100", "Llama-3.1-8B", 1, 256, 330, 0.9},
		{"H100", "Llama-3.1-8B", 1, 1024, 330, 0.9},
		{"A100-80GB", "Llama-3.1-8B", 1, 256, 330, 0.9},
		{"H100", "Llama-3.1-70B", 4, 256, 330, 0.9},
		{"A100-80GB", "Llama-2-70B", 2, 16, 576, 1.0},
	} {
		p := mustPricer(t, c.gpu, c.model, c.tp)
		ctx := make([]int, c.seqs)
		for i := range ctx {
			ctx[i] = c.ctx
		}
		b := p.Breakdown(NewStep(nil, ctx))
		gpu := b.Total - b.Comm - b.Overhead
		name := fmt.Sprintf("%s %s TP%d batch %d", c.gpu, c.model, c.tp, c.seqs)
		const slack = 3 * time.Nanosecond // each Breakdown term is rounded up
		if hi := max(b.Memory, b.DecodeCompute); gpu+slack < hi {
			t.Errorf("%s: GPU time %v below max(memory %v, compute %v)", name, gpu, b.Memory, b.DecodeCompute)
		}
		if sum := b.Memory + b.DecodeCompute; float64(gpu) >= c.maxOfSum*float64(sum) && c.maxOfSum < 1 {
			t.Errorf("%s: GPU time %v is %.2f of memory %v + compute %v, want < %.2f: decode math is added, not in the roofline",
				name, gpu, float64(gpu)/float64(sum), b.Memory, b.DecodeCompute, c.maxOfSum)
		}
		if c.seqs == 1 && float64(gpu) > 1.01*float64(b.Memory) {
			t.Errorf("%s: GPU time %v, want the memory time %v within 1%%", name, gpu, b.Memory)
		}
	}
}
