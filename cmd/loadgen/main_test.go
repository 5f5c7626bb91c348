package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"kvroute/internal/vllm"
	"kvroute/results"
)

// fakeReplica answers chat completions with max_tokens words and serves a vLLM metrics page
// whose prefix-cache counters advance by 1000 queries and 400 hits per completed request.
func fakeReplica(t *testing.T) *httptest.Server {
	t.Helper()
	var done atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Model != "llama-3.1-8b" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Kvroute-Endpoint", "replica-0")
		for i := range body.MaxTokens {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":40}}}\n\n", body.MaxTokens)
		done.Add(1)
		io.WriteString(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		n := float64(done.Load())
		vllm.Write(w, []vllm.Engine{{Model: "llama-3.1-8b", PrefixCacheQueries: 1000 * n, PrefixCacheHits: 400 * n}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

const sweepFile = `name: live-test
seed: 3
requests: 12
fleet: {replicas: [2, 4], gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}
workload: {kind: shared-prefix, groups: 3, prompts_per_group: 4, system_prompt_tokens: 64, question_tokens: 8, output_tokens: 4}
arrival: {process: poisson, rate: [200, 400]}
router: {metrics_interval: 50ms}
policies: [prefix-score]
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadgenWritesResults(t *testing.T) {
	srv := fakeReplica(t)
	out := filepath.Join(t.TempDir(), "live")
	bench := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-target", srv.URL, "-config", writeFile(t, "w.yaml", sweepFile), "-out", out, "-bench-json", bench, "-quiet"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, f := range []string{"summary.json", "summary.csv", "series.json", "requests.csv", "config.yaml", "report.md"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	runs, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
		m := r.Metrics
		if m.Requests != 12 || m.Completed != 12 || r.Policy != "prefix-score" {
			t.Errorf("%s: policy %q, %d of %d completed; want prefix-score, 12 of 12", r.Name, r.Policy, m.Completed, m.Requests)
		}
		if m.HitRate != 0.4 || fmt.Sprint(r.Scenario["server_hit_rate"]) != "0.4" {
			t.Errorf("%s: hit rate %v, server hit rate %v; want 0.4 and 0.4", r.Name, m.HitRate, r.Scenario["server_hit_rate"])
		}
	}
	if got, want := strings.Join(names, " "), "prefix-score/rate=200 prefix-score/rate=400"; got != want {
		t.Errorf("runs %q; want %q", got, want)
	}
	for _, suffix := range []string{"-rate=200", "-rate=400"} {
		b, err := os.ReadFile(strings.TrimSuffix(bench, ".json") + suffix + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil || doc["completed"] != 12.0 || len(doc["ttfts"].([]any)) != 12 {
			t.Errorf("bench%s: completed %v, err %v", suffix, doc["completed"], err)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(out, "requests.csv"))
	if rows := strings.Count(string(csv), "\n"); rows != 25 || !strings.Contains(string(csv), "replica-0") {
		t.Errorf("requests.csv has %d lines (want header + 24), endpoint column filled: %v", rows, strings.Contains(string(csv), "replica-0"))
	}
	if !strings.Contains(stdout.String(), "prefix-score/rate=400") {
		t.Errorf("table lacks a run:\n%s", stdout.String())
	}
}

func TestLoadgenExitCodes(t *testing.T) {
	srv := fakeReplica(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	good := writeFile(t, "w.yaml", sweepFile)
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"missing target", []string{"-config", good}, 2},
		{"bad file", []string{"-target", srv.URL, "-config", writeFile(t, "b.yaml", "name: x\nbogus: 1\n")}, 2},
		{"no requests cap", []string{"-target", srv.URL, "-config", writeFile(t, "n.yaml", "name: x\nworkload: {kind: shared-prefix}\n")}, 2},
		{"target down", []string{"-target", dead.URL, "-config", good, "-metrics", "none"}, 1},
		{"wrong model", []string{"-target", srv.URL, "-config", good, "-model", "other"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append(tc.args, "-out", filepath.Join(t.TempDir(), "o"), "-quiet")
			if got := run(args, &stdout, &stderr); got != tc.want {
				t.Errorf("exit %d; want %d\n%s", got, tc.want, stderr.String())
			}
		})
	}
}

func TestParsePoints(t *testing.T) {
	points, err := Parse([]byte(sweepFile), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range points {
		got = append(got, fmt.Sprintf("%s %v %s", p.Label(), p.Arrival.Rate, p.model()))
	}
	want := "rate=200 200 llama-3.1-8b|rate=400 400 llama-3.1-8b"
	if strings.Join(got, "|") != want {
		t.Errorf("points %q; want %q (fleet lists are not load axes)", strings.Join(got, "|"), want)
	}
	jobs := plan(points, "")
	if jobs[0].name != "prefix-score/rate=200" || jobs[0].policy != "prefix-score" {
		t.Errorf("job %q policy %q", jobs[0].name, jobs[0].policy)
	}
	if jobs := plan(points, "mine"); jobs[1].name != "mine/rate=400" || jobs[1].policy != "mine" {
		t.Errorf("labelled job %q policy %q", jobs[1].name, jobs[1].policy)
	}
}
