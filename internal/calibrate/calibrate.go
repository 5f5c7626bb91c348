// Package calibrate reproduces published vLLM serving benchmarks in the simulator: one
// replica of a named model and GPU, `vllm bench serve`-style single-turn ShareGPT-like
// traffic, and the metrics those benchmarks print (request and output-token throughput,
// median TPOT). Its tests compare the runs with the published figures listed in
// gpumodel/testdata/calibration.json (points of kind "workload").
//
// It also fits the catalog to a user's own replica: ParseBenchServe and ParseRequestsCSV read
// measured runs (`vllm bench serve --save-result --save-detailed` JSON, cmd/loadgen's
// requests.csv), Replay simulates a measurement's requests at their recorded times and
// lengths, and Fit searches the GPU's efficiencies and the client↔replica delay with gonum's
// Nelder–Mead for the replay closest to the measured TTFT, TPOT and E2E, checking a held-out
// part; WriteCatalog and WriteReport write the result (docs/calibrate.md).
package calibrate

import (
	"context"
	"fmt"
	"math"

	"kvroute/gpumodel"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// Setup is a published benchmark's configuration. Zero fields take vLLM's defaults for
// the deployment (gpumodel.DefaultDeployment).
type Setup struct {
	// GPU and Model are catalog names (gpumodel.LookupGPU, gpumodel.LookupModel).
	GPU   string `json:"gpu"`
	Model string `json:"model"`
	// TP is the tensor-parallel size (default 1).
	TP int `json:"tp"`
	// MaxNumSeqs and MaxNumBatchedTokens override the deployment's batch limits.
	MaxNumSeqs          int `json:"max_num_seqs"`
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
	// MemoryUtilization overrides gpu_memory_utilization.
	MemoryUtilization float64 `json:"gpu_memory_utilization"`
	// VLLM names the vLLM release whose semantics the engine follows (engine.ParseRelease;
	// empty: the newest). A published run should name the release closest to the one it ran.
	VLLM string `json:"vllm"`
	// NumSchedulerSteps is vLLM V0's --num-scheduler-steps (0: one; v0.6 only).
	NumSchedulerSteps int `json:"num_scheduler_steps"`
	// Prompts is the number of requests (--num-prompts).
	Prompts int `json:"prompts"`
	// Rate is the Poisson request rate per second; 0 sends every prompt at once
	// (--request-rate inf).
	Rate float64 `json:"rate"`
	// InputTokens and OutputTokens are the mean prompt and answer lengths of the published
	// run (its total input and generated tokens over its requests). The lengths are drawn
	// from the workloads package's ShareGPT-like log-normal distributions with these means.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// MaxPromptTokens clamps every sampled length, as vLLM's ShareGPT sampler drops prompts
	// over 1024 tokens (default 1024).
	MaxPromptTokens int `json:"max_prompt_tokens"`
	// Random gives every request exactly InputTokens and OutputTokens, unclamped, as
	// `vllm bench serve --dataset-name random` does at its default --random-range-ratio 0.
	Random bool `json:"random"`
}

// Result is what `vllm bench serve` prints for the run, from the simulation.
type Result struct {
	RequestsPerS     float64
	OutputTokensPerS float64
	TPOTp50ms        float64
	TTFTp50ms        float64
	MeanInput        float64 // mean prompt tokens actually drawn
	MeanOutput       float64 // mean answer tokens actually drawn
	Preemptions      int
	KVBlocks         int
}

// Metric returns the result's value of a published metric: req/s, out_tok/s, tpot_p50_ms or
// ttft_p50_ms.
func (r Result) Metric(name string) (float64, error) {
	switch name {
	case "req/s":
		return r.RequestsPerS, nil
	case "out_tok/s":
		return r.OutputTokensPerS, nil
	case "tpot_p50_ms":
		return r.TPOTp50ms, nil
	case "ttft_p50_ms":
		return r.TTFTp50ms, nil
	}
	return 0, fmt.Errorf("calibrate: unknown metric %q (want req/s, out_tok/s, tpot_p50_ms or ttft_p50_ms)", name)
}

// Deployment returns the replica s describes.
func (s Setup) Deployment() (gpumodel.Deployment, error) {
	g, err := gpumodel.LookupGPU(s.GPU)
	if err != nil {
		return gpumodel.Deployment{}, err
	}
	m, err := gpumodel.LookupModel(s.Model)
	if err != nil {
		return gpumodel.Deployment{}, err
	}
	d, err := gpumodel.EngineArgs{GPUMemoryUtilization: s.MemoryUtilization,
		MaxNumBatchedTokens: s.MaxNumBatchedTokens, MaxNumSeqs: s.MaxNumSeqs}.Deployment(g, m, max(s.TP, 1))
	if err != nil {
		return d, err
	}
	return d, d.Validate()
}

// Workload returns the request stream's configuration: single-turn synthetic-chat
// conversations (ShareGPT's length distributions, one exchange each, as vLLM's ShareGPT
// sampler takes the first exchange) with the setup's mean lengths, or with exactly its
// lengths when it is Random.
func (s Setup) Workload() workloads.Config {
	arrival := workloads.ArrivalConfig{Process: workloads.ProcessImmediate}
	if s.Rate > 0 {
		arrival = workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: s.Rate}
	}
	w := workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat, MeanTurns: 1, MaxTurns: 1}
	if s.Random {
		w.LengthDist = "constant"
		w.PromptTokens, w.OutputTokens = s.InputTokens, s.OutputTokens
		w.MaxMessageTokens = max(s.InputTokens, s.OutputTokens)
	} else {
		w.MaxMessageTokens = s.MaxPromptTokens
		if w.MaxMessageTokens == 0 {
			w.MaxMessageTokens = 1024
		}
		c := float64(w.MaxMessageTokens)
		w.PromptTokens, w.PromptSigma = unclampedMean(float64(s.InputTokens), promptSigma, c), promptSigma
		w.OutputTokens, w.OutputSigma = unclampedMean(float64(s.OutputTokens), outputSigma, c), outputSigma
	}
	return workloads.Config{Workload: w, Arrival: arrival, Requests: s.Prompts}
}

// ShareGPT's log-normal shapes, the workloads package's synthetic-chat defaults.
const promptSigma, outputSigma = 1.0, 0.8

// unclampedMean returns the mean, in tokens, of a log-normal length of shape sigma whose
// draws clamped at c average target: vLLM's sampler drops ShareGPT prompts over 1024 tokens,
// so a published mean is that of a truncated distribution. E[min(X, c)] for ln X ~
// N(μ, σ²) is e^(μ+σ²/2)·Φ((ln c − μ − σ²)/σ) + c·(1 − Φ((ln c − μ)/σ)), increasing in μ;
// bisection finds μ.
func unclampedMean(target, sigma, c float64) int {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	clamped := func(mean float64) float64 {
		mu := math.Log(mean) - sigma*sigma/2
		return mean*phi((math.Log(c)-mu-sigma*sigma)/sigma) + c*(1-phi((math.Log(c)-mu)/sigma))
	}
	lo, hi := 1.0, 64*c
	if target >= c {
		return int(c)
	}
	for range 100 {
		mid := (lo + hi) / 2
		if clamped(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(math.Round(lo))
}

// Run simulates s with seed and returns the benchmark's metrics.
func Run(ctx context.Context, s Setup, seed uint64) (Result, error) {
	if s.Prompts <= 0 || s.InputTokens <= 0 || s.OutputTokens <= 0 {
		return Result{}, fmt.Errorf("calibrate: prompts %d, input_tokens %d, output_tokens %d: want > 0",
			s.Prompts, s.InputTokens, s.OutputTokens)
	}
	d, err := s.Deployment()
	if err != nil {
		return Result{}, err
	}
	p, err := router.Builtin().New("round-robin", nil, seed)
	if err != nil {
		return Result{}, err
	}
	stream, err := workloads.Build(s.Workload(), seed)
	if err != nil {
		return Result{}, err
	}
	defer stream.Close()
	agg := results.NewAggregator()
	var prompt, output int64
	record := func(r *results.Record) {
		agg.Add(r)
		prompt += int64(r.PromptTokens)
		output += int64(r.OutputTokens)
	}
	release, err := engine.ParseRelease(s.VLLM)
	if err != nil {
		return Result{}, fmt.Errorf("calibrate: %w", err)
	}
	sim, err := cluster.New(cluster.Config{Replicas: []engine.Config{{Deployment: d, Release: release, SchedulerSteps: s.NumSchedulerSteps}}, Model: s.Model},
		p, stream, cluster.Sink{Record: record, ITL: agg.AddITL})
	if err != nil {
		return Result{}, err
	}
	if err := sim.Run(ctx); err != nil {
		return Result{}, err
	}
	m := agg.Metrics()
	if m.Completed != s.Prompts {
		return Result{}, fmt.Errorf("calibrate: %d of %d requests completed", m.Completed, s.Prompts)
	}
	return Result{
		RequestsPerS: m.ThroughputRPS, OutputTokensPerS: m.OutputTokensPerS,
		TPOTp50ms: m.TPOT.P50, TTFTp50ms: m.TTFT.P50,
		MeanInput: float64(prompt) / float64(m.Completed), MeanOutput: float64(output) / float64(m.Completed),
		Preemptions: m.Preemptions, KVBlocks: d.KVBlocks(),
	}, nil
}
