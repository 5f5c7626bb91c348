package loadgen_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"kvroute/internal/loadgen"
	"kvroute/results"
	"kvroute/workloads"
)

// ExampleRun replays a small shared-prefix workload against a fake OpenAI server and
// aggregates the records the way cmd/loadgen does.
func ExampleRun() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"choices":[{"delta":{"content":"Hello "}}]}`,
			`{"choices":[{"delta":{"content":"there"}}]}`,
			`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":32}}}`,
			`[DONE]`,
		} {
			io.WriteString(w, "data: "+ev+"\n\n")
		}
	}))
	defer srv.Close()

	stream, err := workloads.Build(workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSharedPrefix, Groups: 2, PromptsPerGroup: 2,
			SystemPromptTokens: 32, QuestionTokens: 8, OutputTokens: 2},
		Arrival: workloads.ArrivalConfig{Process: workloads.ProcessConstant, Rate: 100},
	}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stream.Close()

	col := results.NewCollector(results.CollectorOpts{Name: "live", Policy: "live", RequestRate: 100})
	opts := loadgen.DefaultOptions()
	opts.Target, opts.Model = srv.URL, "llama-3.1-8b"
	st, err := loadgen.Run(context.Background(), opts, stream, loadgen.Sink{
		Result: func(r *loadgen.Result) {
			if !r.Warmup {
				col.Add(&r.Record)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := col.Run().Metrics
	fmt.Printf("sent %d, completed %d, failed %d, hit rate %.2f\n", st.Sent, m.Completed, m.Failed, m.HitRate)
	// Output:
	// sent 4, completed 4, failed 0, hit rate 0.80
}
