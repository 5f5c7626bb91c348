package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// smallDefault is the embedded default sweep cut down for a test: fewer sessions, one load,
// two replications.
func smallDefault(t *testing.T) string {
	t.Helper()
	src := strings.Replace(string(defaultConfig), "duration: 30s", "duration: 3s", 1)
	src = strings.Replace(src, "rate: [8, 16, 24, 30]", "rate: [40]", 1)
	src = strings.Replace(src, "replications: 5", "replications: 2", 1)
	if strings.Count(src, "\n") != strings.Count(string(defaultConfig), "\n") || strings.Contains(src, "replications: 5") ||
		strings.Contains(src, "duration: 30s") || !strings.Contains(src, "rate: [40]") {
		t.Fatal("default.yaml changed shape: update smallDefault")
	}
	path := filepath.Join(t.TempDir(), "small.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runSim(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("simulate %v: exit %d\n%s", args, code, errb.String())
	}
	return out.String(), errb.String()
}

// TestDefaultSweepEndToEnd runs the default sweep at reduced size twice: every file of the
// schema is written, every run completes every request, and the two runs are identical.
func TestDefaultSweepEndToEnd(t *testing.T) {
	cfg := smallDefault(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	table, _ := runSim(t, "-config", cfg, "-out", a, "-quiet")
	runSim(t, "-config", cfg, "-out", b, "-quiet", "-parallel", "1")
	if !strings.Contains(table, "prefix-cache/rate=40#2") {
		t.Fatalf("table lacks a run:\n%s", table)
	}
	for _, f := range []string{"summary.json", "summary.csv", "requests.csv", "config.yaml", "report.md", "report.html", "plots/ttft-cdf-default.png"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil || len(x) == 0 {
			t.Fatalf("%s: %v (%d bytes)", f, err, len(x))
		}
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs of the same config (parallel 2 vs 1)", f)
		}
	}
	var sum struct {
		Runs []struct {
			Name    string
			Policy  string
			Metrics map[string]any
		}
	}
	data, _ := os.ReadFile(filepath.Join(a, "summary.json"))
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Runs) != 34 {
		t.Fatalf("%d runs, want 17 policies × 2 replications", len(sum.Runs))
	}
	for _, r := range sum.Runs {
		if r.Metrics["completed"] != r.Metrics["requests"] || r.Metrics["requests"].(float64) == 0 {
			t.Errorf("%s: %v of %v requests completed", r.Name, r.Metrics["completed"], r.Metrics["requests"])
		}
	}
	if rows := bytes.Count(mustRead(t, filepath.Join(a, "requests.csv")), []byte("\n")); rows < 34*10 {
		t.Errorf("requests.csv has %d lines", rows)
	}
	if parts, _ := filepath.Glob(filepath.Join(a, ".requests-*")); len(parts) != 0 {
		t.Errorf("part files left behind: %v", parts)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestListAndBadFlags(t *testing.T) {
	out, _ := runSim(t, "-list")
	for _, want := range []string{"prefix-score\tGIE EPP v1.5.0", "vllm-project/aibrix", "H100-SXM-80GB\t79 GiB\t989 TFLOP/s",
		"Llama-3.1-8B\t8.0B\t32 layers\t128 KiB/token", "mooncake\ta Mooncake JSONL trace", "gamma"} {
		if !strings.Contains(out, want) {
			t.Errorf("-list output lacks %q", want)
		}
	}
	var o, e bytes.Buffer
	if code := run([]string{"-config", "/no/such/file.yaml"}, &o, &e); code != 2 {
		t.Errorf("missing config: exit %d, want 2", code)
	}
}

// TestTuneGC checks that a sweep collects at sweepGCPercent unless GOGC is set.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		env  string
		want int
	}{{"", sweepGCPercent}, {"100", 100}, {"off", 100}} {
		t.Setenv("GOGC", c.env)
		debug.SetGCPercent(100)
		tuneGC()
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: the collector runs at %d, want %d", c.env, got, c.want)
		}
	}
}
