package engine

import (
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// pdHarness is a harness whose replica runs P/D legs: it records each read asked for and
// the steps' shapes, and ends reads as each test says.
type pdHarness struct {
	*harness
	reads map[string]int // tokens each decode leg asked to read
	steps []gpumodel.Step
	first map[string]sim.Time
	// done, when set, ends a read: after how long and whether it succeeds.
	done func(req *Request) (time.Duration, bool)
}

func newPDHarness(t *testing.T, kv KVTransferConfig) *pdHarness {
	t.Helper()
	h := &pdHarness{harness: &harness{t: t, k: sim.NewKernel(), results: map[string]Result{}},
		reads: map[string]int{}, first: map[string]sim.Time{}}
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	cfg := Config{Deployment: d, NumBlocks: 200, KVTransfer: kv,
		StepTime: func(gpumodel.Step) time.Duration { return 10 * time.Millisecond }}
	var err error
	h.r, err = New(h.k, cfg, Hooks{
		Done:       func(res Result) { h.results[res.Request.ID] = res },
		FirstToken: func(req *Request, at sim.Time) { h.first[req.ID] = at },
		Step: func(_ sim.Time, _ time.Duration, s gpumodel.Step) {
			h.steps = append(h.steps, s)
			h.checkRefs()
		},
		RemoteRead: func(req *Request, tokens int) {
			h.reads[req.ID] = tokens
			if h.done == nil {
				return
			}
			d, ok := h.done(req)
			h.k.Schedule(h.k.Now()+sim.Time(d), 1, func(sim.Time) { h.r.RemoteKVDone(req, ok) })
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// usedAt records the replica's blocks in use at each of times.
func (h *pdHarness) usedAt(times ...time.Duration) []int {
	out := make([]int, len(times))
	for i, at := range times {
		h.k.Schedule(sim.At(at), 2, func(sim.Time) { out[i] = h.r.pool.used() })
	}
	return out
}

func TestPrefillLegHoldsBlocksUntilReleased(t *testing.T) {
	cases := []struct {
		name    string
		release time.Duration // when ReleaseHeld is called; 0: never
		timeout time.Duration
		want    []int // blocks in use at 0.5 s, 1.5 s and 3 s
	}{
		{"released at 1s", time.Second, 0, []int{4, 0, 0}},
		{"abort timeout 2s", 0, 2 * time.Second, []int{4, 4, 0}},
		{"default timeout 480s", 0, 0, []int{4, 4, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newPDHarness(t, KVTransferConfig{AbortTimeout: tc.timeout})
			req := &Request{ID: "p", Prompt: tokens(1, 60), OutputTokens: 1, PD: PDPrefill}
			h.submitAt(0, req)
			if tc.release > 0 {
				h.k.Schedule(sim.At(tc.release), 1, func(sim.Time) { h.r.ReleaseHeld(req) })
			}
			got := h.usedAt(500*time.Millisecond, 1500*time.Millisecond, 3*time.Second)
			h.run()
			if res := h.results["p"]; res.Status != Completed || res.OutputTokens != 1 {
				t.Fatalf("prefill leg ended %v with %d tokens", res.Status, res.OutputTokens)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("blocks in use: got %v, want %v (61 tokens: 4 blocks)", got, tc.want)
				}
			}
		})
	}
}

func TestHeldBlocksAreNotEvicted(t *testing.T) {
	h := newPDHarness(t, KVTransferConfig{})
	p := &Request{ID: "p", Prompt: tokens(2, 64), OutputTokens: 1, PD: PDPrefill}
	h.submitAt(0, p)
	h.submitAt(sim.At(100*time.Millisecond), &Request{ID: "again", Prompt: p.Prompt, OutputTokens: 1})
	// 196 blocks: more than the 195 the held prefill leg (4 blocks) leaves free of the 199 usable.
	h.submitAt(sim.At(time.Second), &Request{ID: "big", Prompt: tokens(3, 196*16), OutputTokens: 1})
	h.k.Schedule(sim.At(5*time.Second), 1, func(sim.Time) { h.r.ReleaseHeld(p) })
	h.run()
	if got := h.results["again"].CachedTokens; got != 48 {
		t.Fatalf("the held prompt hit %d tokens, want 48", got)
	}
	if got := h.first["big"]; got < sim.At(5*time.Second) {
		t.Fatalf("a request needing the held blocks started at %v, before they were released at 5s", got)
	}
}

func TestPrefillLegMustAskForOneToken(t *testing.T) {
	h := newPDHarness(t, KVTransferConfig{})
	h.submitAt(0, &Request{ID: "p", Prompt: tokens(1, 60), OutputTokens: 2, PD: PDPrefill})
	h.run()
	if got := h.results["p"].Status; got != Rejected {
		t.Fatalf("prefill leg with 2 output tokens: %v, want rejected", got)
	}
}

func TestDecodeLegReadsThenComputesLastPromptToken(t *testing.T) {
	cases := []struct {
		name     string
		local    int // prompt tokens sent to the replica first, as a whole request
		wantRead int
	}{
		{"no local hit", 0, 100},
		{"local hit of 3 blocks", 50, 100 - 48},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newPDHarness(t, KVTransferConfig{})
			h.done = func(*Request) (time.Duration, bool) { return 25 * time.Millisecond, true }
			p := tokens(4, 100)
			at := sim.Time(0)
			if tc.local > 0 {
				h.submitAt(0, &Request{ID: "local", Prompt: p[:tc.local], OutputTokens: 1})
				at = sim.At(time.Second)
			}
			h.submitAt(at, &Request{ID: "d", Prompt: p, OutputTokens: 3, PD: PDDecode})
			h.run()
			if got := h.reads["d"]; got != tc.wantRead {
				t.Fatalf("read %d tokens, want %d", got, tc.wantRead)
			}
			res := h.results["d"]
			// Scheduled at its arrival, read for 25 ms, then one 10 ms step for the last prompt
			// token and the first output token.
			if want := at + sim.At(35*time.Millisecond); h.first["d"] != want {
				t.Fatalf("first token at %v, want %v", h.first["d"], want)
			}
			if res.Status != Completed || res.RemoteTokens != tc.wantRead-1 || res.CachedTokens != 99 {
				t.Fatalf("result %v remote %d cached %d, want completed, remote %d, cached 99",
					res.Status, res.RemoteTokens, res.CachedTokens, tc.wantRead-1)
			}
			last := h.steps[len(h.steps)-3]
			if last.PrefillTokens != 1 || last.PrefillContext != 99 {
				t.Fatalf("first decode-leg step computed %d tokens on %d cached, want 1 on 99", last.PrefillTokens, last.PrefillContext)
			}
		})
	}
}

func TestDecodeLegReadFailure(t *testing.T) {
	cases := []struct {
		name       string
		recompute  bool
		wantStatus Status
		wantPrompt int64 // prompt tokens computed by the step after the failure
	}{
		{"fail", false, Aborted, 0},
		{"recompute", true, Completed, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newPDHarness(t, KVTransferConfig{Recompute: tc.recompute})
			h.done = func(*Request) (time.Duration, bool) { return 25 * time.Millisecond, false }
			h.submitAt(0, &Request{ID: "d", Prompt: tokens(5, 100), OutputTokens: 2, PD: PDDecode})
			used := h.usedAt(10 * time.Millisecond)
			h.run()
			if used[0] != 7 {
				t.Fatalf("blocks while reading: %d, want 7 (the whole prompt's)", used[0])
			}
			res := h.results["d"]
			if res.Status != tc.wantStatus || res.RemoteTokens != 0 {
				t.Fatalf("status %v remote %d, want %v and 0", res.Status, res.RemoteTokens, tc.wantStatus)
			}
			var prompt int64
			for _, s := range h.steps {
				prompt += s.PrefillTokens
			}
			if prompt != tc.wantPrompt {
				t.Fatalf("prompt tokens computed: %d, want %d", prompt, tc.wantPrompt)
			}
			if h.r.pool.used() != 0 {
				t.Fatalf("%d blocks in use at the end", h.r.pool.used())
			}
		})
	}
}

func TestAbortWhileReadingFreesBlocks(t *testing.T) {
	h := newPDHarness(t, KVTransferConfig{})
	h.done = func(*Request) (time.Duration, bool) { return time.Second, true }
	req := &Request{ID: "d", Prompt: tokens(6, 100), OutputTokens: 2, PD: PDDecode}
	h.submitAt(0, req)
	h.k.Schedule(sim.At(100*time.Millisecond), 1, func(sim.Time) { h.r.Abort(req) })
	h.run()
	if res := h.results["d"]; res.Status != Aborted {
		t.Fatalf("status %v, want aborted", res.Status)
	}
	if h.r.pool.used() != 0 {
		t.Fatalf("%d blocks in use after the abort and the late read", h.r.pool.used())
	}
}
