package tune_test

import (
	"context"
	"fmt"
	"math"

	"kvroute/internal/tune"
	"kvroute/router"
	"kvroute/sweep"
)

// Example tunes kv-router's prefill_load_scale against an objective with its best value at
// 4: a stand-in for tune.SimRunner, which simulates a sweep point instead.
func Example() {
	space, err := tune.NewSpace(router.Builtin(), sweep.PolicySpec{Name: "kv-router"}, []string{"prefill_load_scale"})
	if err != nil {
		panic(err)
	}
	run := func(_ context.Context, trials []tune.Trial) ([]float64, error) {
		out := make([]float64, len(trials))
		for i, t := range trials {
			v, _ := t.Spec.Params["prefill_load_scale"].(float64)
			out[i] = 500 * (1 + math.Pow(math.Log(v/4), 2)) * (1 + 0.1*float64(t.Rep%3))
		}
		return out, nil
	}
	s, err := tune.Run(context.Background(), space, tune.TTFTP99, tune.Options{Seed: 1}, run)
	if err != nil {
		panic(err)
	}
	c, err := tune.Compare(context.Background(), s, run)
	if err != nil {
		panic(err)
	}
	fmt.Printf("prefill_load_scale %.0f, %s\n", s.Tuned().Values[0], c.Verdict)
	// Output: prefill_load_scale 4, better
}
