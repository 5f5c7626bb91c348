package main

import (
	"encoding/csv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const repSweep = `name: reps
seed: 7
replications: 3
requests: 40
fleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}
workload: {kind: shared-prefix, groups: 4, prompts_per_group: 10, system_prompt_tokens: 256, question_tokens: 32, output_tokens: 8}
arrival: {process: poisson, rate: 20}
router: {metrics_interval: 50ms}
policies: [random, least-request]
`

// TestReplicationsPairRequests checks that replications run every policy on the same
// requests within a replication and on different requests across replications.
func TestReplicationsPairRequests(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "reps.yaml")
	if err := os.WriteFile(cfg, []byte(repSweep), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	runSim(t, "-config", cfg, "-out", out, "-quiet")
	f, err := os.Open(filepath.Join(out, "requests.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(name string) int { return slices.Index(rows[0], name) }
	run, id, arr, prompt := col("run"), col("id"), col("arrival_ms"), col("prompt_tokens")
	reqs := map[string][]string{} // run name → its requests as "id arrival prompt", sorted
	for _, r := range rows[1:] {
		reqs[r[run]] = append(reqs[r[run]], r[id]+" "+r[arr]+" "+r[prompt])
	}
	if len(reqs) != 6 {
		t.Fatalf("%d runs, want 2 policies × 3 replications: %v", len(reqs), slices.Sorted(maps.Keys(reqs)))
	}
	for _, v := range reqs {
		slices.Sort(v)
	}
	key := func(v []string) string { return strings.Join(v, "\n") }
	for _, rep := range []string{"#1", "#2", "#3"} {
		a, b := reqs["random"+rep], reqs["least-request"+rep]
		if len(a) != 40 || key(a) != key(b) {
			t.Errorf("replication %s: the two policies saw different requests (%d and %d)", rep, len(a), len(b))
		}
	}
	if key(reqs["random#1"]) == key(reqs["random#2"]) || key(reqs["random#2"]) == key(reqs["random#3"]) {
		t.Error("two replications saw the same requests: their workload seeds must differ")
	}
}
