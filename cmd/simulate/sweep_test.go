package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"kvroute/results"
	"kvroute/sweep"
)

// cancelSweep is a small sweep of two runs.
const cancelSweep = `name: cancel
seed: 5
requests: 40
fleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b}
workload: {kind: shared-prefix, groups: 2, prompts_per_group: 4, system_prompt_tokens: 128, question_tokens: 16, output_tokens: 8}
arrival: {process: poisson, rate: 20}
policies: [round-robin, least-request]
`

// TestCancelKeepsFinishedRuns cancels a sweep once its first run has finished: the sweep
// reports the cancellation, and the results written contain exactly the finished runs, with
// their requests.
func TestCancelKeepsFinishedRuns(t *testing.T) {
	points, err := sweep.Parse([]byte(cancelSweep), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobs := sweep.Plan(points)
	jobs = append(jobs, sweep.Plan(points)...) // four runs, one at a time
	for i := range jobs {
		jobs[i].Index = i
		jobs[i].Name = jobs[i].Name + "#" + string(rune('a'+i))
	}
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	finished := 0
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := options{out: out, parallel: 1, quiet: true}
	runs, err := sweepWith(ctx, jobs, o, io.Discard, log, func() {
		if finished++; finished == 1 {
			cancel()
		}
	})
	if err == nil {
		t.Fatal("a cancelled sweep reported no error")
	}
	done := completed(runs)
	if len(done) == 0 || len(done) == len(jobs) {
		t.Fatalf("%d of %d runs finished, want some but not all", len(done), len(jobs))
	}
	if err := writeResults(out, runs, points); err != nil {
		t.Fatal(err)
	}
	got, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(done) {
		t.Fatalf("summary.json has %d runs, %d finished", len(got), len(done))
	}
	if parts, _ := filepath.Glob(filepath.Join(out, ".requests-*")); len(parts) != 0 {
		t.Fatalf("part files left: %v", parts)
	}
	if st, err := os.Stat(filepath.Join(out, "requests.csv")); err != nil || st.Size() == 0 {
		t.Fatalf("requests.csv: %v", err)
	}
}
