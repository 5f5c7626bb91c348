package gpumodel

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// sweepDeployments returns every built-in GPU × model × TP in {1, 2, 4, 8}
// that validates (fits and divides the heads).
func sweepDeployments(t *testing.T) []Deployment {
	t.Helper()
	c := DefaultCatalog()
	var out []Deployment
	for _, g := range c.GPUs() {
		for _, m := range c.Models() {
			for _, tp := range []int{1, 2, 4, 8} {
				if d := DefaultDeployment(g, m, tp); d.Validate() == nil {
					out = append(out, d)
				}
			}
		}
	}
	if len(out) < 50 {
		t.Fatalf("only %d deployments validate; the sweep is too thin", len(out))
	}
	return out
}

// sweepSteps returns a grid of batch shapes: prefill chunks of 0..8192 tokens
// after 0..32k cached tokens, mixed with 0..1024 decoding sequences of
// 0..100k context.
func sweepSteps() []Step {
	var out []Step
	for _, pf := range []int{0, 1, 16, 128, 512, 2048, 8192} {
		for _, ctx := range []int{0, 1000, 32000} {
			for _, seqs := range []int{0, 1, 8, 64, 256, 1024} {
				for _, dctx := range []int{0, 100, 4000, 100_000} {
					var s Step
					s.AddPrefill(pf, ctx)
					s.DecodeSeqs, s.DecodeContext = seqs, int64(seqs*dctx)
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// TestFloorsHold sweeps deployments × batch shapes, with BF16, FP8 and (experts) MXFP4 weights, and
// checks that no step is priced below its FLOP floor or its memory floor, even on an ideal GPU
// with every efficiency at 1 and no overheads.
func TestFloorsHold(t *testing.T) {
	steps := sweepSteps()
	for _, q := range []Quantization{QuantNone, QuantFP8, QuantMXFP4} {
		for _, d := range sweepDeployments(t) {
			if d.Quantization = q; d.Validate() != nil {
				continue // BF16 or FP8 experts of gpt-oss-120b do not fit a GPU; MXFP4 needs experts
			}
			for _, ideal := range []bool{false, true} {
				if ideal {
					d.GPU.Efficiency = Efficiency{PrefillMFU: 1, DecodeMFU: 1, Memory: 1, Link: 1}
					d.GPU.LinkLatency, d.Overheads = 0, Overheads{}
				}
				checkFloors(t, d, steps, fmt.Sprintf("%s %q ideal=%v", name(d), q, ideal))
			}
		}
	}
}

// checkFloors prices every step on d and checks it against the FLOP and memory floors.
func checkFloors(t *testing.T, d Deployment, steps []Step, label string) {
	t.Helper()
	p, err := NewPricer(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		got, flop, mem := p.StepTime(s), p.FLOPFloor(s), p.MemoryFloor(s)
		if s.Tokens() == 0 {
			if got != 0 {
				t.Fatalf("%s: empty step priced %v", label, got)
			}
			continue
		}
		if got < flop || got < mem || got <= 0 {
			t.Fatalf("%s step %+v: priced %v, below FLOP floor %v or memory floor %v", label, s, got, flop, mem)
		}
		if b := p.Breakdown(s); b.Total != got {
			t.Fatalf("%s step %+v: Breakdown.Total %v != StepTime %v", label, s, b.Total, got)
		}
	}
}

func name(d Deployment) string { return fmt.Sprintf("%s/%s/tp%d", d.Model.Name, d.GPU.Name, d.TP) }

func mustPricer(t testing.TB, gpu, model string, tp int) *Pricer {
	t.Helper()
	g, err := LookupGPU(gpu)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LookupModel(model)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPricer(DefaultDeployment(g, m, tp))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPublishedFloors checks the cases where an existing simulator priced
// prefill 2.6–4.8× faster than peak FLOP/s allows, or decode below the weight
// read floor (BLIS, inference-sim/inference-sim, with its default trained-physics latency
// model, as we ran it): each must now cost at least the hard lower bound.
func TestPublishedFloors(t *testing.T) {
	tests := []struct {
		name  string
		gpu   string
		model string
		tp    int
		step  Step
		floor time.Duration
	}{
		{"llama-8b h100 prefill 2048", "H100", "Llama-3.1-8B", 1, NewStep([]Chunk{{2048, 0}}, nil), 34 * time.Millisecond},
		{"llama-8b a100-80 prefill 2048", "A100-80GB", "Llama-3.1-8B", 1, NewStep([]Chunk{{2048, 0}}, nil), 105 * time.Millisecond},
		{"qwen3-32b 2xh100 prefill 7200", "H100", "Qwen3-32B", 2, NewStep([]Chunk{{7200, 0}}, nil), 254 * time.Millisecond},
		{"qwen3-32b 2xh100 decode 1", "H100", "Qwen3-32B", 2, NewStep(nil, []int{7200}), 9800 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPricer(t, tc.gpu, tc.model, tc.tp)
			if got := p.StepTime(tc.step); got < tc.floor {
				t.Errorf("StepTime = %v, below the hard lower bound %v", got, tc.floor)
			}
		})
	}
}

// TestContextCosts checks that attention cost grows with context length, and
// that a prefix-cache hit makes a prefill much cheaper than recomputing it.
func TestContextCosts(t *testing.T) {
	p := mustPricer(t, "H100", "Llama-3.1-8B", 1)
	var prev time.Duration
	for _, ctx := range []int{0, 1000, 8000, 32000, 128000} {
		decode := NewStep(nil, []int{ctx, ctx, ctx, ctx})
		got := p.StepTime(decode)
		if got <= prev {
			t.Errorf("decode at context %d: %v, not above %v at the shorter context", ctx, got, prev)
		}
		prev = got
	}
	prev = 0
	for _, ctx := range []int{0, 1000, 8000, 32000} {
		got := p.StepTime(NewStep([]Chunk{{512, ctx}}, nil))
		if got <= prev {
			t.Errorf("512-token chunk after %d cached: %v, not above %v", ctx, got, prev)
		}
		prev = got
	}
	cold := p.StepTime(NewStep([]Chunk{{8192, 0}}, nil))
	warm := p.StepTime(NewStep([]Chunk{{1024, 7168}}, nil))
	if ratio := float64(cold) / float64(warm); ratio < 4 {
		t.Errorf("8k prompt cold %v vs 7k cached %v: ratio %.1f, want ≥ 4", cold, warm, ratio)
	}
}

func TestStepGrowsWithWork(t *testing.T) {
	p := mustPricer(t, "A100-80GB", "Llama-2-70B", 2)
	var prev time.Duration
	for _, seqs := range []int{1, 2, 8, 32, 128, 256} {
		ctx := make([]int, seqs)
		got := p.StepTime(NewStep(nil, ctx))
		if got <= prev {
			t.Errorf("decode batch %d: %v, not above %v", seqs, got, prev)
		}
		prev = got
	}
}

func TestStepBuilding(t *testing.T) {
	tests := []struct {
		name          string
		tokens, ctx   int
		want          int64
		wantChunks    int
		wantContextIn int64
	}{
		{"fresh prompt", 4, 0, 4 + 3 + 2 + 1, 1, 0},
		{"after cached context", 2, 10, 11 + 12, 1, 10},
		{"single token", 1, 0, 1, 1, 0},
		{"empty chunk ignored", 0, 100, 0, 0, 0},
		{"negative context as zero", 3, -5, 6, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Step
			s.AddPrefill(tc.tokens, tc.ctx)
			if s.PrefillPairs != tc.want || s.PrefillChunks != tc.wantChunks || s.PrefillContext != tc.wantContextIn {
				t.Errorf("AddPrefill(%d, %d) = %+v, want pairs %d chunks %d context %d",
					tc.tokens, tc.ctx, s, tc.want, tc.wantChunks, tc.wantContextIn)
			}
		})
	}
	got := NewStep([]Chunk{{100, 50}, {20, 0}}, []int{7, 9})
	want := Step{PrefillChunks: 2, PrefillTokens: 120, PrefillContext: 50,
		PrefillPairs: PrefillPairs(100, 50) + PrefillPairs(20, 0), DecodeSeqs: 2, DecodeContext: 16}
	if got != want {
		t.Errorf("NewStep = %+v, want %+v", got, want)
	}
	if got.Tokens() != 122 || got.Requests() != 4 {
		t.Errorf("Tokens, Requests = %d, %d; want 122, 4", got.Tokens(), got.Requests())
	}
}

func TestNegativeFieldsPriceAsZero(t *testing.T) {
	p := mustPricer(t, "H100", "Llama-3.1-8B", 1)
	base := NewStep(nil, []int{100})
	neg := base
	neg.PrefillTokens, neg.PrefillPairs, neg.PrefillContext, neg.PrefillChunks = -5, -9, -1, -2
	if got, want := p.StepTime(neg), p.StepTime(base); got != want {
		t.Errorf("negative prefill fields: %v, want %v", got, want)
	}
	if got := p.StepTime(Step{DecodeSeqs: -3}); got != 0 {
		t.Errorf("all-negative step priced %v, want 0", got)
	}
}

func TestStepTimeFunc(t *testing.T) {
	d := DefaultDeployment(H100SXM80GB(), Llama31x8B(), 1)
	s := NewStep([]Chunk{{300, 0}}, []int{10, 20})
	got, err := StepTime(d, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustPricer(t, "H100", "Llama-3.1-8B", 1).StepTime(s); got != want {
		t.Errorf("StepTime = %v, want %v", got, want)
	}
	d.TP = 0
	if _, err := StepTime(d, s); err == nil {
		t.Error("StepTime accepted an invalid deployment")
	}
	if _, err := NewPricer(DefaultDeployment(L4(), Llama31x70B(), 1)); !errors.Is(err, ErrDoesNotFit) {
		t.Errorf("NewPricer(70B on one L4) = %v, want ErrDoesNotFit", err)
	}
}

func TestStepTimeAllocs(t *testing.T) {
	p := mustPricer(t, "H100", "Llama-3.1-70B", 4)
	s := NewStep([]Chunk{{2048, 4096}}, []int{1000, 2000, 3000})
	if n := testing.AllocsPerRun(100, func() { _ = p.StepTime(s) }); n != 0 {
		t.Errorf("StepTime allocates %v times per call, want 0", n)
	}
}

// BenchmarkStepTime prices one mixed step: a 512-token chunk after 3,584
// cached tokens plus 200 decoding sequences, as sim/engine would each step.
func BenchmarkStepTime(b *testing.B) {
	p := mustPricer(b, "H100", "Llama-3.1-70B", 4)
	var s Step
	s.AddPrefill(512, 3584)
	for i := range 200 {
		s.AddDecode(1000 + i)
	}
	b.ReportAllocs()
	var sink time.Duration
	for b.Loop() {
		sink += p.StepTime(s)
	}
	if sink <= 0 {
		b.Fatal("no time priced")
	}
}

// TestCustomAllReduce checks which all-reduces the pricer charges at vLLM's custom
// all-reduce latency: those of a TP 2, 4, 6 or 8 replica on a GPU with a measured latency,
// not disabled, whose tensor (step tokens × hidden × dtype bytes) is under 8 MiB.
func TestCustomAllReduce(t *testing.T) {
	h100, a100 := H100SXM80GB(), A100SXM80GB()
	m, err := LookupModel("Llama-3.1-8B") // hidden 4096 in BF16: 8 MiB is 1,024 tokens exactly
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		gpu     GPU
		tp      int
		disable bool
		tokens  int
		custom  bool
	}{
		{"tp2 decode", h100, 2, false, 16, true},
		{"tp4 decode", h100, 4, false, 16, true},
		{"1023 tokens, under 8 MiB", h100, 2, false, 1023, true},
		{"1024 tokens, 8 MiB (vLLM's bound is exclusive)", h100, 2, false, 1024, false},
		{"disabled", h100, 2, true, 16, false},
		{"tp8", h100, 8, false, 16, true},
		{"tp16 unsupported", h100, 16, false, 16, false},
		{"unmeasured gpu", a100, 2, false, 16, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DefaultDeployment(c.gpu, m, c.tp)
			d.DisableCustomAllReduce = c.disable
			p, err := NewPricer(d)
			if err != nil {
				t.Fatal(err)
			}
			s := NewStep(nil, make([]int, c.tokens))
			latency := c.gpu.LinkLatency
			if c.custom {
				latency = c.gpu.CustomAllReduceLatency
			}
			transfer := float64(2*m.Layers) * float64(m.Hidden*m.DTypeBytes) * 2 * float64(c.tp-1) / float64(c.tp) /
				(c.gpu.LinkBandwidth * c.gpu.Efficiency.Link) * float64(c.tokens)
			want := float64(2*m.Layers)*latency.Seconds() + transfer
			if got := p.Breakdown(s).Comm.Seconds(); math.Abs(got-want) > 1e-9 {
				t.Errorf("comm = %.3f ms, want %.3f ms (%d all-reduces at %v)", got*1e3, want*1e3, 2*m.Layers, latency)
			}
		})
	}
}
