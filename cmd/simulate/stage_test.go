package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvroute/sweep"
)

// stagedSweep is a small load ladder: a warm-up and two stages, drained as inference-perf does.
const stagedSweep = `name: staged
seed: 3
fleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}
workload: {kind: shared-prefix, groups: 4, prompts_per_group: 3, system_prompt_tokens: 512, question_tokens: 64, output_tokens: 32, repeat: true, cycle: true}
arrival:
  process: poisson
  stages:
    - {rate: 5, duration: 4s, warmup: true}
    - {rate: 2, duration: 3s}
    - {rate: 20, duration: 2s}
router: {metrics_interval: 50ms}
policies: [prefix-score, random]
`

// TestStagedSweep runs a staged sweep twice: each run reports its stages and their mean, the
// stage table is printed, and the result files are identical.
func TestStagedSweep(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "staged.yaml")
	if err := os.WriteFile(cfg, []byte(stagedSweep), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	table, _ := runSim(t, "-config", cfg, "-out", a, "-quiet")
	runSim(t, "-config", cfg, "-out", b, "-quiet", "-parallel", "1")
	for _, f := range []string{"summary.json", "report.md", "requests.csv", "config.yaml"} {
		if !bytes.Equal(mustRead(t, filepath.Join(a, f)), mustRead(t, filepath.Join(b, f))) {
			t.Errorf("%s differs between two runs of the same seed", f)
		}
	}
	if !strings.Contains(table, "5@0 (warm-up)") {
		t.Errorf("no stage table in the output:\n%s", table)
	}
	var sum struct {
		Runs []struct {
			Name   string
			Stages []struct {
				Index   int
				Rate    float64
				Metrics struct{ Requests int }
			}
			StageMean *struct{ Stages int } `json:"stage_mean"`
		}
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(a, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Runs {
		var n []int
		for _, s := range r.Stages {
			n = append(n, s.Metrics.Requests)
		}
		// floor(rate × duration) requests per stage: 20, 6, 40.
		if len(n) != 3 || n[0] != 20 || n[1] != 6 || n[2] != 40 || r.StageMean == nil || r.StageMean.Stages != 2 {
			t.Errorf("%s: stage requests %v, mean %+v; want [20 6 40] and a mean over 2 stages", r.Name, n, r.StageMean)
		}
	}
}

// TestStagedSweepErrors checks that a bad stage is reported with the file and the field.
func TestStagedSweepErrors(t *testing.T) {
	tests := []struct{ name, from, to, want string }{
		{"no duration", "{rate: 2, duration: 3s}", "{rate: 2}", "arrival.stages[1].duration"},
		{"rate beside stages", "  process: poisson\n", "  process: poisson\n  rate: 4\n", "arrival.rate: not used with stages"},
		{"unknown stage field", "{rate: 2, duration: 3s}", "{rate: 2, duration: 3s, qps: 1}", "field qps not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sweep.Parse([]byte(strings.Replace(stagedSweep, tc.from, tc.to, 1)), "staged.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "staged.yaml") {
				t.Errorf("Parse: %v; want an error naming staged.yaml and %q", err, tc.want)
			}
		})
	}
}
