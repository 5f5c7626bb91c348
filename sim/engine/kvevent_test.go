package engine

import (
	"fmt"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// TestKVEventsCarryTokens checks that each BlockStored event carries what vLLM's does: the
// block's tokens and its parent's hash, which re-hash to the block's own hash, prompt and
// answer blocks alike, and the generated blocks of a request without an Answer, which the
// newest release hashes too.
func TestKVEventsCarryTokens(t *testing.T) {
	k := sim.NewKernel()
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	const salt = 77
	stored, answerBlocks := 0, 0
	r, err := New(k, Config{Deployment: d, NumBlocks: 60, StepTime: func(gpumodel.Step) time.Duration { return time.Millisecond }}, Hooks{
		Done: func(Result) {},
		KV: func(ev KVEvent) {
			if !ev.Stored {
				return
			}
			stored++
			parent := uint64(salt)
			if ev.HasParent {
				parent = ev.Parent
			}
			if len(ev.Tokens) != d.BlockSize || BlockHash(parent, ev.Tokens) != ev.Hash {
				t.Fatalf("stored %x: %d tokens, parent %x (has %v) do not hash to it", ev.Hash, len(ev.Tokens), ev.Parent, ev.HasParent)
			}
			if ev.Tokens[0] >= 50000 {
				answerBlocks++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		answer := make([]int32, 40)
		for j := range answer {
			answer[j] = int32(50000 + j)
		}
		if i%2 == 1 {
			answer = nil // generated tokens the engine makes up (OutputToken)
		}
		req := &Request{ID: fmt.Sprint(i), Prompt: tokens(uint64(i%3), 100), OutputTokens: 40, Answer: answer, Salt: salt}
		k.Schedule(sim.At(time.Duration(i)*time.Second), 0, func(sim.Time) { r.Submit(req) })
	}
	if err := k.Run(sim.Never); err != nil {
		t.Fatal(err)
	}
	if stored == 0 || answerBlocks == 0 {
		t.Fatalf("%d stored events, %d of answer blocks: want both", stored, answerBlocks)
	}
}
