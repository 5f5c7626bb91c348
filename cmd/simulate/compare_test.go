package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvroute/results"
	"kvroute/results/report"
)

const tinySweep = `name: tiny
seed: 2
requests: 60
fleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}
workload: {kind: shared-prefix, groups: 4, prompts_per_group: 15, system_prompt_tokens: 256, question_tokens: 16, output_tokens: 16}
arrival: {process: poisson, rate: [5, 20]}
router: {metrics_interval: 50ms}
policies: [prefix-score]
`

// compareDirsFixture simulates the tiny sweep and writes a "live" copy of it whose runs are
// renamed (so they match by policy and load) and whose p99 TTFT is 1.5 times longer.
func compareDirsFixture(t *testing.T) (simDir, liveDir string) {
	t.Helper()
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	if err := os.WriteFile(cfg, []byte(tinySweep), 0o644); err != nil {
		t.Fatal(err)
	}
	simDir, liveDir = filepath.Join(tmp, "sim"), filepath.Join(tmp, "live")
	runSim(t, "-config", cfg, "-out", simDir, "-quiet")
	runs, err := results.ReadSummary(simDir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		runs[i].Name = strings.Replace(runs[i].Name, "prefix-score", "live", 1)
		runs[i].Metrics.TTFT.P99 *= 1.5
	}
	if err := os.MkdirAll(liveDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteDir(liveDir, runs, nil); err != nil {
		t.Fatal(err)
	}
	return simDir, liveDir
}

func TestCompareCommand(t *testing.T) {
	simDir, liveDir := compareDirsFixture(t)
	cases := []struct {
		name     string
		args     func(out string) []string
		wantCode int
		wantOut  []string
	}{
		{"flag form, out of tolerance", func(out string) []string { return []string{"-compare", simDir + "," + liveDir, "-out", out} },
			1, []string{"prefix-score/rate=5 ↔ live/rate=5", "ttft_ms.p99", "-33.3%", "out of tolerance"}},
		{"subcommand form, same run twice", func(out string) []string { return []string{"compare", "-out", out, simDir, simDir} },
			0, []string{"prefix-score/rate=20", "within tolerance"}},
		{"flag with equals", func(out string) []string { return []string{"-compare=" + simDir + "," + simDir, "-out", out} },
			0, []string{"within tolerance"}},
		{"one directory", func(out string) []string { return []string{"-compare", simDir, "-out", out} }, 2, nil},
		{"missing directory", func(out string) []string { return []string{"compare", simDir, filepath.Join(out, "nope")} }, 2, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "cmp")
			var stdout, stderr bytes.Buffer
			if got := run(tc.args(out), &stdout, &stderr); got != tc.wantCode {
				t.Fatalf("exit %d; want %d\n%s", got, tc.wantCode, stderr.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, stdout.String())
				}
			}
			if tc.wantCode == 2 {
				return
			}
			md, err := os.ReadFile(filepath.Join(out, report.CompareFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, png := range []string{"compare-ttft-vs-rate.png", "compare-ttft-cdf-prefix-score-rate-5.png"} {
				if !bytes.Contains(md, []byte("("+png+")")) {
					t.Errorf("compare.md does not link %s", png)
				}
				if _, err := os.Stat(filepath.Join(out, png)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestIsCompare(t *testing.T) {
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"-compare", "a,b"}, true},
		{[]string{"--compare=a,b"}, true},
		{[]string{"compare", "a", "b"}, true},
		{[]string{"-config", "compare.yaml"}, false},
		{[]string{"-out", "x", "-quiet"}, false},
		{nil, false},
	}
	for _, tc := range cases {
		if got := isMode(tc.args, "compare"); got != tc.want {
			t.Errorf("isMode(%q, compare) = %v; want %v", tc.args, got, tc.want)
		}
	}
}
