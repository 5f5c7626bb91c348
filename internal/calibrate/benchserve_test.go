package calibrate

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseBenchServe(t *testing.T) {
	f, err := os.Open("testdata/bench_small.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ParseBenchServe(f, "bench_small.json")
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := []Observed{ // the failed request is left out; arrivals from the first start
		{Arrival: 0, PromptTokens: 500, OutputTokens: 3, TTFT: 50 * ms, E2E: 72 * ms},
		{Arrival: 500 * ms, PromptTokens: 200, OutputTokens: 2, TTFT: 30 * ms, E2E: 50 * ms},
		{Arrival: 600 * ms, PromptTokens: 300, OutputTokens: 4, TTFT: 40 * ms, E2E: 71 * ms},
	}
	if d := cmp.Diff(want, m.Requests); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	if m.Model != "meta-llama/Llama-3.1-8B-Instruct" || len(m.ITLs) != 6 {
		t.Errorf("model %q, %d gaps; want the model_id and 6 gaps", m.Model, len(m.ITLs))
	}
}

func TestParseBenchServeErrors(t *testing.T) {
	const ok = `"input_lens":[10],"output_lens":[2],"ttfts":[0.1],"itls":[[0.01]]`
	for _, tc := range []struct {
		name, doc, field string
		missing          bool
	}{
		{"no save-detailed", `{"request_rate":"inf","completed":1}`, "input_lens", true},
		{"no itls", `{"input_lens":[10],"output_lens":[2],"ttfts":[0.1]}`, "itls", true},
		{"finite rate needs start_times", `{"request_rate":4,` + ok + `}`, "start_times", true},
		{"concurrency needs start_times", `{"max_concurrency":8,` + ok + `}`, "start_times", true},
		{"wrong type", `{"input_lens":["10"],"output_lens":[2],"ttfts":[0.1],"itls":[[0.01]]}`, "input_lens", false},
		{"bad rate", `{"request_rate":"fast",` + ok + `}`, "request_rate", false},
		{"ragged", `{"input_lens":[10,20],"output_lens":[2],"ttfts":[0.1],"itls":[[0.01]]}`, "output_lens", false},
		{"negative ttft", `{"input_lens":[10],"output_lens":[2],"ttfts":[-0.1],"itls":[[0.01]]}`, "ttfts[0]", false},
		{"latency below ttft", `{"latencies":[0.05],` + ok + `}`, "ttfts[0]", false},
		{"zero prompt", `{"input_lens":[0],"output_lens":[2],"ttfts":[0.1],"itls":[[0.01]]}`, "input_lens[0]", false},
		{"trailing", `{` + ok + `} {}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBenchServe(strings.NewReader(tc.doc), "x.json")
			var fe *BenchFieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want a *BenchFieldError", err)
			}
			if fe.File != "x.json" || fe.Field != tc.field {
				t.Errorf("error names file %q field %q, want x.json and %q (%v)", fe.File, fe.Field, tc.field, err)
			}
			if got := errors.Is(err, ErrMissingField); got != tc.missing {
				t.Errorf("errors.Is(ErrMissingField) = %v, want %v (%v)", got, tc.missing, err)
			}
		})
	}
}

func TestParseBenchServeAllAtOnce(t *testing.T) {
	// Without start_times, request_rate "inf" and no cap: every request at 0.
	doc := `{"request_rate":"inf","max_concurrency":null,"input_lens":[10,20],"output_lens":[2,1],"ttfts":[0.1,0.2],"itls":[[0.01],[]]}`
	m, err := ParseBenchServe(strings.NewReader(doc), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.Requests {
		if r.Arrival != 0 {
			t.Errorf("arrival %v, want 0", r.Arrival)
		}
	}
	if got := m.Requests[0].E2E; got != 110*time.Millisecond {
		t.Errorf("e2e without latencies %v, want ttft + gaps = 110ms", got)
	}
}

// FuzzParseBenchServe checks that no input panics, and that what parses is a valid
// measurement that a second parse of the same bytes reproduces.
func FuzzParseBenchServe(f *testing.F) {
	seed, err := os.ReadFile("testdata/bench_small.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"request_rate":"inf","input_lens":[1],"output_lens":[1],"ttfts":[1e-9],"itls":[[]]}`))
	f.Add([]byte(`{"start_times":[1e308,0],"input_lens":[1,2],"output_lens":[3,4],"ttfts":[1,1],"itls":[[1e308],[0]]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseBenchServe(strings.NewReader(string(b)), "fuzz.json")
		if err != nil {
			var fe *BenchFieldError
			if !errors.As(err, &fe) && !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("parsed an invalid measurement: %v", err)
		}
		again, err := ParseBenchServe(strings.NewReader(string(b)), "fuzz.json")
		if err != nil || !cmp.Equal(m, again) {
			t.Fatalf("second parse differs: %v", err)
		}
	})
}
