package gpumodel

import (
	"testing"
	"time"
)

func TestPrefillTimeSumsChunkedSteps(t *testing.T) {
	d := DefaultDeployment(H100SXM80GB(), Llama31x8B(), 1)
	pp, err := NewPrefillPredictor(d)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := NewPricer(d)
	budget := d.MaxNumBatchedTokens
	step := func(chunk, ctx, dec int) time.Duration {
		s := Step{DecodeSeqs: dec, DecodeContext: int64(dec) * 1000}
		s.AddPrefill(chunk, ctx)
		return p.StepTime(s)
	}
	tests := []struct {
		name                     string
		tokens, cached, decoding int
		want                     time.Duration
	}{
		{"nothing to prefill", 0, 500, 3, 0},
		{"one step", 100, 0, 0, step(100, 0, 0)},
		{"cached prefix is attended, not computed", 100, 4000, 0, step(100, 4000, 0)},
		{"two chunks", budget + 10, 0, 0, step(budget, 0, 0) + step(10, budget, 0)},
		{"decoders take budget and time", budget, 0, 4, step(budget-4, 0, 4) + step(4, budget-4, 4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := pp.PrefillTime(tc.tokens, tc.cached, tc.decoding, int64(tc.decoding)*1000)
			if got != tc.want {
				t.Errorf("PrefillTime = %v, want %v", got, tc.want)
			}
		})
	}
	if a, b := pp.PrefillTime(8000, 0, 0, 0), pp.PrefillTime(2000, 6000, 0, 0); a <= b {
		t.Errorf("an 8000-token prompt took %v cold, %v with 6000 cached: want more cold", a, b)
	}
}

func TestBatchTimePacksFullSteps(t *testing.T) {
	d := DefaultDeployment(H100SXM80GB(), Llama31x8B(), 1)
	pp, _ := NewPrefillPredictor(d)
	p, _ := NewPricer(d)
	step := func(n int) time.Duration {
		var s Step
		s.AddPrefill(n, 0)
		return p.StepTime(s)
	}
	b := d.MaxNumBatchedTokens
	if got, want := pp.BatchTime(2*b+7, 0, 0), 2*step(b)+step(7); got != want {
		t.Errorf("BatchTime(2 steps + 7) = %v, want %v", got, want)
	}
	// Sixteen 128-token prompts queued together cost less than one step each (the weights
	// stream once per step): about half on this H100.
	if batched, alone := pp.BatchTime(16*128, 0, 0), 16*pp.PrefillTime(128, 0, 0, 0); batched*4 > alone*3 {
		t.Errorf("16 x 128 tokens batched %v, one by one %v: want batching to pay", batched, alone)
	}
}
