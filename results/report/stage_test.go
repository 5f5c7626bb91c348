package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/results"
	"kvroute/results/resultstest"
)

// TestStagesInResults checks that per-stage results reach summary.json (and read back), the
// report and the terminal table, and that runs without stages write neither.
func TestStagesInResults(t *testing.T) {
	runs, _ := resultstest.Runs()
	runs[0].Stages = []results.Stage{{Index: 0, Rate: 15, Warmup: true, Metrics: results.Metrics{Completed: 1, TTFT: results.Dist{P90: 600}}},
		{Index: 1, Rate: 3, StartS: 70, Metrics: results.Metrics{Completed: 2, TTFT: results.Dist{P90: 1500, Mean: 700}, OutputTokensPerS: 123}}}
	runs[0].StageMean = results.MeanOverStages(runs[0].Stages)
	dir := t.TempDir()
	if err := WriteDir(dir, runs, nil); err != nil {
		t.Fatal(err)
	}
	back, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(runs[0].Stages, back[0].Stages); d != "" || back[0].StageMean == nil || back[1].Stages != nil {
		t.Errorf("stages do not round-trip (-want +got):\n%s (mean %v, run 1 %v)", d, back[0].StageMean, back[1].Stages)
	}
	report, err := os.ReadFile(filepath.Join(dir, results.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Stages", "| 15@0 (warm-up) | 3@1 |", "| 1 | 1.500 | 0.700 | 123.0 |"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var tbl bytes.Buffer
	if err := WriteStageTable(&tbl, runs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "15@0 (warm-up)") || !strings.Contains(tbl.String(), "1.50") {
		t.Errorf("stage table:\n%s", tbl.String())
	}
	tbl.Reset()
	if err := WriteStageTable(&tbl, runs[1:]); err != nil || tbl.Len() != 0 {
		t.Errorf("stage table without stages: %q, %v", tbl.String(), err)
	}
}
