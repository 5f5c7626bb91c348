package emulate

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

// TestPhaseHistograms serves concurrent requests and checks the phase histograms against
// each other and the engine's counters: every completed request has one queue, prefill,
// decode and inference sample; queue + prefill sum to TTFT and prefill + decode to inference;
// decode sums to E2E − TTFT; every generated token after a request's first is one TPOT gap;
// and the iteration histogram counts every prompt and generated token once.
func TestPhaseHistograms(t *testing.T) {
	r, base := startReplica(t, func(c *Config) { c.Speed = 200 })
	c := client()
	const n = 24
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d}`, strings.Repeat(fmt.Sprintf("word%d ", i), 50+40*i), 4+i%9)
			resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
			if err == nil {
				_, err = tryReadCompletion(t, resp)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	var s snapshot
	r.do(func(c *core) { s = c.snapshot() })
	p := s.Phases
	for name, h := range map[string]histogram{"queue": p.queue, "prefill": p.prefill, "decode": p.decode, "inference": p.inference} {
		if h.count != n {
			t.Errorf("%s: %d samples, want %d", name, h.count, n)
		}
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	near("queue + prefill", p.queue.sum+p.prefill.sum, s.TTFT.sum)
	near("prefill + decode", p.prefill.sum+p.decode.sum, p.inference.sum)
	near("decode", p.decode.sum, s.E2E.sum-s.TTFT.sum)
	if p.prefill.sum <= 0 || p.decode.sum <= 0 {
		t.Errorf("prefill %v s, decode %v s: want both > 0", p.prefill.sum, p.decode.sum)
	}
	if want := uint64(s.GenerationTokens) - n; p.tpot.count != want {
		t.Errorf("tpot: %d gaps, want %d (generated tokens after each first)", p.tpot.count, want)
	}
	near("tpot sum", p.tpot.sum, p.decode.sum)
	near("iteration tokens", p.iter.sum, float64(s.PromptTokens+s.GenerationTokens))
}
