package calibrate

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readMetricsFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vllm-metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseMetricsFile(t *testing.T) {
	got, err := ParseMetricsFile(strings.NewReader(readMetricsFixture(t)), "vllm-metrics.json", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["b"]; ok || len(got) != 1 {
		t.Fatalf("got runs %v: want a only (b's page had no histograms)", got)
	}
	a := got["a"]
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"TTFT mean over both servers", a.TTFT.MeanMS(), 1e3 * 0.35 / 5},
		{"TPOT from both names", a.TPOT.MeanMS(), 1e3 * 0.7 / 50},
		{"E2E mean", a.E2E.MeanMS(), 1e3 * 5.0 / 5},
		{"prefill, one server", a.Prefill.MeanMS(), 1e3 * 0.2 / 4},
		{"queue absent", a.Queue.MeanMS(), 0},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %v ms, want %v", c.name, c.got, c.want)
		}
	}
}

func TestParseMetricsFileErrors(t *testing.T) {
	good := readMetricsFixture(t)
	for _, tc := range []struct{ name, doc, field string }{
		{"not json", "{", ""},
		{"no runs", `{}`, `"runs"`},
		{"unknown key", strings.Replace(good, `"url"`, `"uri"`, 1), "uri"},
		{"unknown run", strings.Replace(good, `"run": "b"`, `"run": "c"`, 1), `runs[1].run`},
		{"bounds not ascending", strings.Replace(good, `"le": "0.3"`, `"le": "+Inf"`, 1), `buckets[1].le`},
		{"count going down", strings.Replace(good, `{"le": "0.01", "count": 30}`, `{"le": "0.01", "count": 50}`, 1), `buckets[1].count`},
		{"inf bucket not the count", strings.Replace(good, `"sum": 4.5, "count": 4`, `"sum": 4.5, "count": 5`, 1), `.buckets`},
		{"run twice", strings.Replace(good, `"run": "b"`, `"run": "a"`, 1), `runs[1].run`},
		{"negative sum", strings.Replace(good, `"sum": 0.3`, `"sum": -0.3`, 1), `.sum`},
		{"no sum", strings.Replace(good, `"sum": 0.3, `, ``, 1), `sum`},
		{"bucket without a count", strings.Replace(good, `{"le": "0.1", "count": 4}`, `{"le": "0.1"}`, 1), `count`},
		{"unknown histogram key", strings.Replace(good, `"sum": 0.3`, `"total": 0.3`, 1), `"total"`},
		{"missing required", strings.NewReplacer(`"vllm:e2e_request_latency_seconds"`, `"vllm:request_queue_time_seconds"`).Replace(good),
			"vllm:e2e_request_latency_seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMetricsFile(strings.NewReader(tc.doc), "dir/vllm-metrics.json", []string{"a", "b"})
			var fe *BenchFieldError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), "dir/vllm-metrics.json") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %v, want a *BenchFieldError naming the file and %q", err, tc.field)
			}
		})
	}
}

// FuzzParseMetricsFile checks that any input either fails with an error naming the file or
// yields finite, non-negative means with the required histograms observed.
func FuzzParseMetricsFile(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "vllm-metrics.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"runs":[]}`))
	f.Add([]byte(`{"runs":[{"run":"a","servers":[{"url":"u","histograms":{"vllm:time_to_first_token_seconds":{"buckets":[{"le":"+Inf","count":1}],"sum":1e308,"count":1}}}]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := ParseMetricsFile(strings.NewReader(string(doc)), "f.json", []string{"a", "b"})
		if err != nil {
			if !strings.Contains(err.Error(), "f.json") {
				t.Fatalf("error %v does not name the file", err)
			}
			return
		}
		for run, s := range got {
			if run != "a" && run != "b" {
				t.Fatalf("run %q not asked for", run)
			}
			for _, m := range []Moment{s.TTFT, s.TPOT, s.E2E, s.Prefill, s.Queue, s.Decode} {
				if !finiteNonNeg(m.Count) || !(m.Sum >= 0) || math.IsNaN(m.MeanMS()) {
					t.Fatalf("run %s: moment %+v", run, m)
				}
			}
			if s.TTFT.Count <= 0 || s.TPOT.Count <= 0 || s.E2E.Count <= 0 {
				t.Fatalf("run %s: a required histogram without observations: %+v", run, s)
			}
		}
	})
}
