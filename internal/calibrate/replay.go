package calibrate

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"kvroute/gpumodel"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// Replica is the simulated replica a measurement is replayed on.
type Replica struct {
	// Deployment is the replica; its GPU's Efficiency is what Fit adjusts.
	Deployment gpumodel.Deployment
	// Model is the model name the simulated requests ask for.
	Model string
	// Release is the vLLM release the engine follows (engine.ParseRelease; zero: the newest).
	Release engine.Release
	// NetworkDelay is the one-way client↔replica delay, added to delivery, first token and
	// completion (sim/cluster's NetworkDelay).
	NetworkDelay time.Duration
}

// Simulated is the replay of one measurement: its requests in the measurement's order, and the
// simulated inter-token gaps of the whole run.
type Simulated struct {
	Requests []Observed
	ITLs     []time.Duration
}

// tracePath names the in-memory trace Replay hands the workloads package.
const tracePath = "recorded-requests.csv"

// Replay simulates m's requests, with their recorded lengths and arrival times, on one
// replica routed round-robin. A request over the measurement's MaxConcurrency is not held
// back: its recorded start time already includes the wait for a slot. Prompts are unique
// (the files carry lengths, not text), so no prefix is shared.
func Replay(ctx context.Context, rep Replica, m Measurement) (Simulated, error) {
	return replay(ctx, rep, m, traceOf(m.Requests))
}

// traceOf renders reqs as the trace Replay hands the workloads package: an Azure trace in
// Vidur's columns (arrival in seconds, prompt and output tokens).
func traceOf(reqs []Observed) string {
	var csv strings.Builder
	csv.WriteString("arrived_at,num_prefill_tokens,num_decode_tokens\n")
	for _, r := range reqs {
		fmt.Fprintf(&csv, "%.9f,%d,%d\n", r.Arrival.Seconds(), r.PromptTokens, r.OutputTokens)
	}
	return csv.String()
}

// replay is Replay of m with its trace already rendered (traceOf(m.Requests)): a fit replays
// each measurement once per evaluation and renders it once.
func replay(ctx context.Context, rep Replica, m Measurement, trace string) (Simulated, error) {
	open := func(string) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(trace)), nil }
	stream, err := workloads.Build(workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindAzure, Path: tracePath},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessTrace},
	}, 1, workloads.WithOpener(open))
	if err != nil {
		return Simulated{}, fmt.Errorf("calibrate: %s: %w", m.Source, err)
	}
	defer stream.Close()
	p, err := router.Builtin().New("round-robin", nil, 1)
	if err != nil {
		return Simulated{}, err
	}
	out := Simulated{Requests: make([]Observed, len(m.Requests))}
	done := make([]bool, len(m.Requests))
	var recErr error
	record := func(r *results.Record) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.ID, "r"))
		if err != nil || i < 0 || i >= len(out.Requests) || done[i] || r.Status != results.StatusCompleted {
			recErr = fmt.Errorf("calibrate: %s: simulated request %q ended %s %s", m.Source, r.ID, r.Status, r.Error)
			return
		}
		done[i] = true
		out.Requests[i] = Observed{Arrival: r.Arrival, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
			TTFT: r.FirstToken - r.Arrival, E2E: r.Finish - r.Arrival}
	}
	itl := func(d time.Duration, n int) {
		for range n {
			out.ITLs = append(out.ITLs, d)
		}
	}
	s, err := cluster.New(cluster.Config{Replicas: []engine.Config{{Deployment: rep.Deployment, Release: rep.Release}}, Model: rep.Model, NetworkDelay: rep.NetworkDelay},
		p, stream, cluster.Sink{Record: record, ITL: itl})
	if err != nil {
		return Simulated{}, fmt.Errorf("calibrate: %w", err)
	}
	if err := s.Run(ctx); err != nil {
		return Simulated{}, fmt.Errorf("calibrate: %s: %w", m.Source, err)
	}
	if recErr != nil {
		return Simulated{}, recErr
	}
	for i, ok := range done {
		if !ok {
			return Simulated{}, fmt.Errorf("calibrate: %s: simulated request %d did not complete", m.Source, i)
		}
	}
	return out, nil
}
