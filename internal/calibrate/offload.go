package calibrate

import (
	"fmt"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
	"kvroute/sim/engine"
)

// OffloadSetup is a published single-request measurement of vLLM's CPU KV tier: one
// replica with the GPU prefix cache disabled, a prompt's KV stored in the CPU tier by an
// earlier request, then the same prompt again, its time to first token with the KV loaded
// from CPU against it computed on the GPU (vLLM's offloading blog, Figure 1).
type OffloadSetup struct {
	// GPU and Model are catalog names; TP is the tensor-parallel size (default 1).
	GPU   string `json:"gpu"`
	Model string `json:"model"`
	TP    int    `json:"tp"`
	// PromptTokens is the prompt length.
	PromptTokens int `json:"prompt_tokens"`
	// BlockSize is the GPU and CPU block size in tokens (default 16).
	BlockSize int `json:"block_size"`
}

// OffloadResult is the simulated single-request TTFT with and without a CPU hit.
type OffloadResult struct {
	Recompute, Load time.Duration
}

// Metric returns the result in a calibration point's metric: "ttft_ratio" (recompute over
// load), "load_ttft_ms" or "recompute_ttft_ms".
func (r OffloadResult) Metric(name string) (float64, error) {
	switch name {
	case "ttft_ratio":
		return float64(r.Recompute) / float64(r.Load), nil
	case "load_ttft_ms":
		return float64(r.Load) / 1e6, nil
	case "recompute_ttft_ms":
		return float64(r.Recompute) / 1e6, nil
	}
	return 0, fmt.Errorf("calibrate: unknown offload metric %q", name)
}

// RunOffload simulates s: the prompt alone on an idle replica, computed, then loaded.
func RunOffload(s OffloadSetup) (OffloadResult, error) {
	g, err := gpumodel.LookupGPU(s.GPU)
	if err != nil {
		return OffloadResult{}, err
	}
	m, err := gpumodel.LookupModel(s.Model)
	if err != nil {
		return OffloadResult{}, err
	}
	d := gpumodel.DefaultDeployment(g, m, max(s.TP, 1))
	if s.BlockSize > 0 {
		d.BlockSize = s.BlockSize
	}
	var r OffloadResult
	if r.Recompute, err = offloadTTFT(d, s.PromptTokens, false); err != nil {
		return r, err
	}
	r.Load, err = offloadTTFT(d, s.PromptTokens, true)
	return r, err
}

// offloadTTFT returns the TTFT of an n-token prompt on an idle replica of d with a CPU tier
// large enough for it and GPU hits ignored; warm first sends the prompt once, so that its
// blocks are in the tier.
func offloadTTFT(d gpumodel.Deployment, n int, warm bool) (time.Duration, error) {
	k := sim.NewKernel()
	var first sim.Time
	r, err := engine.New(k, engine.Config{Deployment: d, Offload: engine.OffloadConfig{
		Bytes: d.KVBytesPerTokenPerGPU() * int64(max(d.TP, 1)) * int64(n+d.BlockSize) * 2, IgnoreGPUHits: true,
	}}, engine.Hooks{FirstToken: func(req *engine.Request, at sim.Time) {
		if req.ID == "measured" {
			first = at
		}
	}})
	if err != nil {
		return 0, err
	}
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(i % 30000)
	}
	if warm {
		k.Schedule(0, 0, func(sim.Time) { r.Submit(&engine.Request{ID: "warm", Prompt: prompt, OutputTokens: 1}) })
	}
	const at = sim.Time(time.Hour) // long after the warm-up's store
	k.Schedule(at, 0, func(sim.Time) { r.Submit(&engine.Request{ID: "measured", Prompt: prompt, OutputTokens: 1}) })
	if err := k.Run(sim.Never); err != nil {
		return 0, err
	}
	if first == 0 {
		return 0, fmt.Errorf("calibrate: the %d-token prompt produced no token", n)
	}
	return (first - at).Duration(), nil
}
