package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvroute/results"
	"kvroute/results/stats"
)

// TestDefaultShowsTheChoice runs the default sweep's highest load with a cache-aware and a
// cache-blind policy over three replications and checks the property the default was
// chosen for: the choice of router matters there, by at least 2× in p99 TTFT, and
// significantly (paired t-test on the log ratio).
func TestDefaultShowsTheChoice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 30 s of simulated traffic per run")
	}
	src := string(defaultConfig)
	for _, r := range [][2]string{{"rate: [8, 16, 24, 30]", "rate: 30"}, {"replications: 5", "replications: 3"}} {
		if !strings.Contains(src, r[0]) {
			t.Fatalf("default.yaml changed shape (no %q): update this test", r[0])
		}
		src = strings.Replace(src, r[0], r[1], 1)
	}
	i := strings.Index(src, "policies:")
	src = src[:i] + "policies: [prefix-cache, random]\n"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "top.yaml")
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	runSim(t, "-config", cfg, "-out", filepath.Join(dir, "out"), "-quiet")
	var sum struct {
		Runs []results.Run `json:"runs"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "out", "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	p99 := map[string][]float64{}
	for _, r := range sum.Runs {
		p99[r.Policy] = append(p99[r.Policy], r.Metrics.TTFT.P99) // runs are in replication order
	}
	iv, p := stats.PairedT(p99["random"], p99["prefix-cache"], true)
	t.Logf("random / prefix-cache p99 TTFT: %.2f× [%.2f, %.2f], p = %.2g (%v vs %v ms)", iv.Mean, iv.Lo, iv.Hi, p, p99["random"], p99["prefix-cache"])
	if iv.N != 3 || iv.Lo < 2 || p >= 0.05 {
		t.Errorf("at the default's highest load random's p99 TTFT is %.2f× [%.2f, %.2f] prefix-cache's (p = %.2g): want ≥ 2×, significantly",
			iv.Mean, iv.Lo, iv.Hi, p)
	}
}
