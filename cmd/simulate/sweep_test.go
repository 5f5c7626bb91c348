package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"kvroute/results"
)

// TestCancelKeepsFinishedRuns cancels a sweep once its first run has finished: the sweep
// reports the cancellation, and the results written contain exactly the finished runs, with
// their requests.
func TestCancelKeepsFinishedRuns(t *testing.T) {
	points, err := Parse([]byte(base), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobs := plan(points)
	jobs = append(jobs, plan(points)...) // four runs, one at a time
	for i := range jobs {
		jobs[i].index = i
		jobs[i].name = jobs[i].name + "#" + string(rune('a'+i))
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
