package gpumodel

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestGptOssActiveParams checks the active parameters the shapes imply against the model
// cards' (5.13B and 3.61B): attention, router, four experts per layer and the LM head.
func TestGptOssActiveParams(t *testing.T) {
	tests := []struct {
		model  Model
		active float64
	}{
		{GptOss120B(), 5.13e9},
		{GptOss20B(), 3.61e9},
	}
	for _, tc := range tests {
		t.Run(tc.model.Name, func(t *testing.T) {
			if got := float64(tc.model.ActiveParams()); math.Abs(got/tc.active-1) > 0.005 {
				t.Errorf("ActiveParams = %.4g, want %.4g ±0.5%%", got, tc.active)
			}
			if tc.model.LayerActiveParams() >= tc.model.LayerMatmulParams() {
				t.Errorf("active params per layer %d not below all %d", tc.model.LayerActiveParams(), tc.model.LayerMatmulParams())
			}
		})
	}
}

func TestExpectedExpertsTouched(t *testing.T) {
	moe := GptOss120B()
	tests := []struct {
		name   string
		model  Model
		tokens float64
		want   float64
	}{
		{"dense runs its one MLP", Llama31x8B(), 100, 1},
		{"no tokens run nothing", moe, 0, 0},
		{"one token runs its top-k", moe, 1, 4},
		{"two tokens overlap a little", moe, 2, 128 * (1 - (124.0/128)*(124.0/128))},
		{"a prefill chunk runs them all", moe, 8192, 128},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.model.ExpectedExpertsTouched(tc.tokens); math.Abs(got-tc.want) > 1e-9*max(1, tc.want) {
				t.Errorf("ExpectedExpertsTouched(%v) = %v, want %v", tc.tokens, got, tc.want)
			}
		})
	}
	prev := 0.0
	for n := 1.0; n <= 1024; n *= 2 {
		got := moe.ExpectedExpertsTouched(n)
		if got < prev || got > 128 {
			t.Fatalf("ExpectedExpertsTouched(%v) = %v: not increasing within [0, 128] (previous %v)", n, got, prev)
		}
		prev = got
	}
}

// fullAttentionTwin returns m with full attention in every layer.
func fullAttentionTwin(m Model) Model {
	m.SlidingLayers, m.SlidingWindow = 0, 0
	return m
}

// TestMoEStepPricing checks that a mixture of experts streams more expert weights as a
// decode batch grows, that a prefill's FLOPs follow the active parameters, and that the
// sliding-window layers make long contexts cheaper than full attention would.
func TestMoEStepPricing(t *testing.T) {
	d := DefaultDeployment(H200SXM141GB(), GptOss120B(), 1)
	p, err := NewPricer(d)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(p *Pricer, seqs, ctx int) Step {
		var s Step
		for range seqs {
			s.AddDecode(ctx)
		}
		return s
	}
	one, many := p.Breakdown(decode(p, 1, 1000)), p.Breakdown(decode(p, 256, 1000))
	expert := float64(d.Model.Layers) * float64(d.Model.ExpertParams()) * mxfp4Bytes
	if got, want := many.Bytes-one.Bytes, expert*(d.Model.ExpectedExpertsTouched(256)-4); got < want {
		t.Errorf("256 sequences stream %.3g bytes more than 1, want at least the %.3g of the experts they touch", got, want)
	}
	if one.Bytes > float64(d.WeightBytesPerGPU())/4 {
		t.Errorf("one decoding sequence streams %.3g bytes, more than a quarter of all weights (%d): it should touch 4 of 128 experts",
			one.Bytes, d.WeightBytesPerGPU())
	}
	var pf Step
	pf.AddPrefill(4096, 0)
	flops := p.Breakdown(pf).FLOPs / 4096
	if lin := 2 * float64(d.Model.Layers) * float64(d.Model.LayerActiveParams()); flops < lin || flops > 1.5*lin {
		t.Errorf("prefill FLOPs per token %.3g, want between the active linear FLOPs %.3g and 1.5× them", flops, lin)
	}
	full := DefaultDeployment(H200SXM141GB(), fullAttentionTwin(GptOss120B()), 1)
	pFull, err := NewPricer(full)
	if err != nil {
		t.Fatal(err)
	}
	long := decode(p, 64, 100_000)
	if got, twin := p.StepTime(long), pFull.StepTime(long); got >= twin {
		t.Errorf("64 sequences at 100k context take %v with sliding windows, not below %v with full attention", got, twin)
	}
	short := decode(p, 64, 64) // within the window both read the same keys
	if got, twin := p.StepTime(short), pFull.StepTime(short); got != twin {
		t.Errorf("within the window the sliding model prices %v, the full-attention twin %v", got, twin)
	}
}

// TestSlidingWindowKV checks the hybrid KV cache accounting: per-token bytes count the
// full-attention layers only, so capacity is about twice a full-attention twin's, and a
// transfer carries every full-attention token plus the window.
func TestSlidingWindowKV(t *testing.T) {
	d := DefaultDeployment(H200SXM141GB(), GptOss120B(), 1)
	twin := DefaultDeployment(H200SXM141GB(), fullAttentionTwin(GptOss120B()), 1)
	if got, want := d.KVBytesPerTokenPerGPU()*2, twin.KVBytesPerTokenPerGPU(); got != want {
		t.Errorf("2 × KV bytes per token = %d, want the full-attention twin's %d", got, want)
	}
	if got, want := d.KVCapacityTokens(), 2*twin.KVCapacityTokens(); got < want-d.BlockSize || got > want+d.BlockSize {
		t.Errorf("capacity %d tokens, want twice the twin's (%d)", got, want)
	}
	perToken := d.KVBytesPerToken()
	tests := []struct {
		name   string
		tokens int
		want   int64
	}{
		{"nothing", 0, 0},
		{"inside the window both halves", 100, 2 * 100 * perToken},
		{"past the window", 5000, 5000*perToken + 128*perToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.KVTransferBytes(tc.tokens); got != tc.want {
				t.Errorf("KVTransferBytes(%d) = %d, want %d", tc.tokens, got, tc.want)
			}
		})
	}
	tp4 := DefaultDeployment(H200SXM141GB(), GptOss120B(), 4)
	if tp4.KVBytesPerToken() != perToken || tp4.KVBytesPerTokenPerGPU()*4 != perToken {
		t.Errorf("TP 4 holds %d bytes per token per GPU and %d per replica, want a quarter of and all %d",
			tp4.KVBytesPerTokenPerGPU(), tp4.KVBytesPerToken(), perToken)
	}
}

func TestMoEValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Model)
		want string
	}{
		{"top-k above experts", func(m *Model) { m.ExpertsPerToken = 129 }, "experts_per_token must be in [1, 128]"},
		{"top-k without experts", func(m *Model) { m.Experts = 0 }, "needs experts"},
		{"every layer sliding", func(m *Model) { m.SlidingLayers = m.Layers }, "sliding_layers"},
		{"sliding layers without a window", func(m *Model) { m.SlidingWindow = 0 }, "sliding_layers"},
		{"mxfp4 on a dense model", func(m *Model) { m.Experts, m.ExpertsPerToken = 0, 0 }, "mxfp4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := GptOss120B()
			tc.edit(&m)
			err := m.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	d := DefaultDeployment(H100SXM80GB(), Llama31x8B(), 1)
	d.Quantization = QuantMXFP4
	if err := d.Validate(); err == nil {
		t.Error("a dense deployment with mxfp4 weights validated")
	}
	if err := DefaultDeployment(H100SXM80GB(), GptOss120B(), 1).Validate(); errors.Is(err, ErrDoesNotFit) || err != nil {
		t.Errorf("gpt-oss-120b on one H100: %v (its 60.8 GiB checkpoint fits 80 GB)", err)
	}
}

func TestNICGbps(t *testing.T) {
	tests := []struct {
		gpu  GPU
		want float64
	}{
		{H100SXM80GB(), 400},
		{H200SXM141GB(), 400},
		{A100SXM80GB(), 200},
	}
	for _, tc := range tests {
		if tc.gpu.NICGbps != tc.want {
			t.Errorf("%s: NICGbps = %v, want %v", tc.gpu.Name, tc.gpu.NICGbps, tc.want)
		}
	}
	g := H100SXM80GB()
	g.NICGbps = math.Inf(1)
	if g.Validate() == nil {
		t.Error("an infinite NIC bandwidth validated")
	}
}

// TestGptOssPrefillCalibration holds ExpertMFU to its anchor: llm-d's peak prefill throughput
// of gpt-oss-120b through the P/D path (8 prefill replicas of TP 1 on H200, 8,192-token
// chunks), 33,821 tokens/s, i.e. an idle 8,192-token prompt's first token after 242 ms: the
// prefill, the KV transfer at one 400 Gb/s NIC, and the decode replica's (TP 4) step that
// recomputes the last prompt token. Without ExpertMFU the price is more than 15% fast.
func TestGptOssPrefillCalibration(t *testing.T) {
	const tokens, published = 8192, 8192.0 / 33821 // seconds
	ttft := func(g GPU) float64 {
		pre, err := NewPrefillPredictor(DefaultDeployment(g, GptOss120B(), 1))
		if err != nil {
			t.Fatal(err)
		}
		dec := DefaultDeployment(g, GptOss120B(), 4)
		p, err := NewPricer(dec)
		if err != nil {
			t.Fatal(err)
		}
		var last Step
		last.AddPrefill(1, tokens-1)
		transfer := float64(dec.KVTransferBytes(tokens)) / (g.NICGbps * 1e9 / 8)
		return pre.PrefillTime(tokens, 0, 0, 0).Seconds() + transfer + p.StepTime(last).Seconds()
	}
	g := H200SXM141GB()
	got := ttft(g)
	t.Logf("idle 8,192-token TTFT through P/D: %.1f ms, published %.1f ms", 1e3*got, 1e3*published)
	if math.Abs(got/published-1) > 0.1 {
		t.Errorf("idle 8,192-token TTFT %.1f ms, want %.1f ms ±10%%", 1e3*got, 1e3*published)
	}
	g.Efficiency.ExpertMFU = 0
	if dense := ttft(g); dense > 0.85*published {
		t.Errorf("without ExpertMFU the TTFT is %.1f ms, not 15%% below the published %.1f ms: the fit is not needed", 1e3*dense, 1e3*published)
	}
}
