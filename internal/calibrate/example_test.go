package calibrate_test

import (
	"fmt"
	"strings"

	"kvroute/internal/calibrate"
)

// ExampleParseBenchServe reads the per-request arrays of a `vllm bench serve --save-result
// --save-detailed` file; a failed request (an error, no tokens) is left out.
func ExampleParseBenchServe() {
	doc := `{"model_id": "llama-3.1-8b", "request_rate": 2.0, "max_concurrency": null,
	  "input_lens": [512, 128, 256], "output_lens": [4, 3, 0],
	  "ttfts": [0.05, 0.02, 0.0], "itls": [[0.01, 0.01, 0.012], [0.011, 0.01], []],
	  "start_times": [1017.25, 1017.75, 1018.0], "errors": ["", "", "Bad Request"]}`
	m, err := calibrate.ParseBenchServe(strings.NewReader(doc), "bench.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range m.Requests {
		tpot, _ := r.TPOT()
		fmt.Printf("at %v: %d+%d tokens, TTFT %v, TPOT %v\n", r.Arrival, r.PromptTokens, r.OutputTokens, r.TTFT, tpot)
	}
	// Output:
	// at 0s: 512+4 tokens, TTFT 50ms, TPOT 10.666666ms
	// at 500ms: 128+3 tokens, TTFT 20ms, TPOT 10.5ms
}
