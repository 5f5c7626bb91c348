package workloads_test

import (
	"fmt"
	"time"

	"kvroute/workloads"
)

// Example drives a two-turn shared-prefix workload the way the simulator does: take each
// request at its arrival time, and report it finished 2 s later, which schedules the
// session's next turn after a 1 s think time.
func Example() {
	cfg, err := workloads.ParseConfig("example.yaml", []byte(`
workload: {kind: shared-prefix, groups: 2, prompts_per_group: 1, system_prompt_tokens: 6,
           question_tokens: 3, output_tokens: 4, turns: 2, think_time: 1s}
arrival: {process: constant, rate: 1}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := workloads.Build(cfg, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	type done struct {
		id string
		at time.Duration
	}
	var pending []done // completions in time order (constant service time keeps them sorted)
	for {
		req, ok := s.Peek()
		if len(pending) > 0 && (!ok || pending[0].at <= req.Arrival) {
			_ = s.Done(pending[0].id, workloads.Completion{At: pending[0].at})
			pending = pending[1:]
			continue
		}
		if !ok {
			break
		}
		req, _ = s.Next()
		fmt.Printf("%-5s at %v: %d prompt tokens (%s) + %d to generate\n", req.ID, req.Arrival, len(req.Tokens), req.PrefixGroup, req.OutputTokens)
		pending = append(pending, done{req.ID, req.Arrival + 2*time.Second})
	}
	fmt.Printf("%+v\n", s.Stats())
	// Output:
	// s0.0  at 1s: 9 prompt tokens (g0) + 4 to generate
	// s1.0  at 2s: 9 prompt tokens (g1) + 4 to generate
	// s0.1  at 4s: 16 prompt tokens (g0) + 4 to generate
	// s1.1  at 5s: 16 prompt tokens (g1) + 4 to generate
	// {Requests:4 Sessions:2 Skipped:0 Aborted:0 Cut:0}
}

// ExampleWords shows the synthetic vocabulary that generated prompts are written in.
func ExampleWords() {
	fmt.Printf("%q\n", workloads.Words([]int32{0, 1, 100, 10099}))
	// Output: "ba be baba zuzu "
}
