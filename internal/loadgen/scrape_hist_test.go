package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/internal/vllm"
	"kvroute/results"
)

// histPage serves a vLLM page whose prefill-time histogram gains one 0.2 s and one 3 s
// observation per scrape, on two engines.
func histPage(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		vllm.Write(w, []vllm.Engine{{Model: "m"}})
		fmt.Fprintln(w, "# TYPE vllm:request_prefill_time_seconds histogram")
		for _, e := range []string{"0", "1"} {
			fmt.Fprintf(w, "vllm:request_prefill_time_seconds_bucket{engine=%q,le=\"0.3\"} %d\n", e, k)
			fmt.Fprintf(w, "vllm:request_prefill_time_seconds_bucket{engine=%q,le=\"5.0\"} %d\n", e, 2*k)
			fmt.Fprintf(w, "vllm:request_prefill_time_seconds_bucket{engine=%q,le=\"+Inf\"} %d\n", e, 2*k)
			fmt.Fprintf(w, "vllm:request_prefill_time_seconds_sum{engine=%q} %g\n", e, 3.2*float64(k))
			fmt.Fprintf(w, "vllm:request_prefill_time_seconds_count{engine=%q} %d\n", e, 2*k)
		}
	}))
}

func TestHistogramDeltas(t *testing.T) {
	a, plain := histPage(t), vllmPage(t, 10, 1)
	defer a.Close()
	defer plain.Close()
	urls := []string{a.URL, plain.URL}
	before := Scrape(context.Background(), nil, urls)
	Scrape(context.Background(), nil, urls[:1]) // a second scrape in between: the delta spans two
	after := Scrape(context.Background(), nil, urls)
	got := HistogramDeltas(before, after)
	if len(got) != 2 {
		t.Fatalf("%d servers, want 2", len(got))
	}
	want := results.HistogramDelta{Buckets: []results.HistogramBucket{{LE: "0.3", Count: 4}, {LE: "5", Count: 8}, {LE: "+Inf", Count: 8}}, Sum: 2 * 2 * 3.2, Count: 8}
	d, ok := got[0].Histograms["vllm:request_prefill_time_seconds"]
	if !ok {
		t.Fatalf("prefill histogram missing: %+v", got[0])
	}
	if diff := cmp.Diff(want, d, cmp.Comparer(func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 })); diff != "" {
		t.Errorf("prefill delta (-want +got):\n%s", diff)
	}
	if len(got[0].Absent) != len(HistogramNames)-1 {
		t.Errorf("absent %v: want every other name", got[0].Absent)
	}
	if len(got[1].Histograms) != 0 || len(got[1].Absent) != len(HistogramNames) {
		t.Errorf("a page without histograms: %+v, want all absent and no error", got[1])
	}
	if after[1].Err != nil {
		t.Errorf("a page without histograms is not an error: %v", after[1].Err)
	}
}

func TestHistogramDeltaReset(t *testing.T) {
	b := vllm.Histogram{Bounds: []float64{1, inf()}, Counts: []float64{5, 9}, Sum: 20, Count: 9}
	a := vllm.Histogram{Bounds: []float64{1, inf()}, Counts: []float64{1, 2}, Sum: 1.5, Count: 2}
	got := HistogramDeltas([]Counters{{URL: "u", Histograms: map[string]vllm.Histogram{"vllm:e2e_request_latency_seconds": b}}},
		[]Counters{{URL: "u", Histograms: map[string]vllm.Histogram{"vllm:e2e_request_latency_seconds": a}}})
	want := results.HistogramDelta{Buckets: []results.HistogramBucket{{LE: "1", Count: 1}, {LE: "+Inf", Count: 2}}, Sum: 1.5, Count: 2}
	if diff := cmp.Diff(want, got[0].Histograms["vllm:e2e_request_latency_seconds"]); diff != "" {
		t.Errorf("after a restart the delta counts from zero (-want +got):\n%s", diff)
	}
}

func TestWriteMetricsFileDeterministic(t *testing.T) {
	runs := []results.RunHistograms{{Run: "r", Servers: []results.ServerHistograms{{URL: "u", Histograms: map[string]results.HistogramDelta{
		"vllm:request_queue_time_seconds":  {Buckets: []results.HistogramBucket{{LE: "+Inf", Count: 1}}, Sum: 0.5, Count: 1},
		"vllm:e2e_request_latency_seconds": {Buckets: []results.HistogramBucket{{LE: "+Inf", Count: 1}}, Sum: 2, Count: 1},
	}}}}}
	var x, y bytes.Buffer
	if err := WriteMetricsFile(&x, runs); err != nil {
		t.Fatal(err)
	}
	if err := WriteMetricsFile(&y, runs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x.Bytes(), y.Bytes()) {
		t.Error("the same runs gave different bytes")
	}
	var back results.VLLMMetrics
	if err := json.Unmarshal(x.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runs, back.Runs); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if i, j := bytes.Index(x.Bytes(), []byte("e2e_request")), bytes.Index(x.Bytes(), []byte("queue_time")); i > j {
		t.Error("histogram keys are not sorted")
	}
}

func inf() float64 { return math.Inf(1) }
