package tune

import (
	"context"
	"math"
	"os"
	"testing"

	"kvroute/sweep"
)

func smallPoint(t *testing.T) sweep.Point {
	t.Helper()
	data, err := os.ReadFile("testdata/small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, err := sweep.Parse(data, "small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return points[0]
}

// TestSimRunner runs real simulations: the objective comes from the run, the same trial
// gives the same value, another replication another one, and parameters the policy
// rejects score as the worst value instead of failing the batch.
func TestSimRunner(t *testing.T) {
	p := smallPoint(t)
	run := SimRunner(p, TTFTP99, 2)
	spec := sweep.PolicySpec{Name: "kv-router"}
	bad := sweep.PolicySpec{Name: "kv-router", Params: map[string]any{"prefill_load_scale": -1.0}}
	got, err := run(context.Background(), []Trial{{spec, 0}, {bad, 0}, {spec, 0}, {spec, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !(got[0] > 0) || math.IsInf(got[0], 0) {
		t.Errorf("p99 TTFT %v ms, want a positive finite value", got[0])
	}
	if !math.IsInf(got[1], 1) {
		t.Errorf("rejected parameters scored %v, want +Inf", got[1])
	}
	if got[0] != got[2] {
		t.Errorf("the same trial gave %v and %v", got[0], got[2])
	}
	if got[0] == got[3] {
		t.Errorf("replications 0 and 1 gave the same p99 TTFT %v: the seeds do not differ", got[0])
	}
}

func TestObjectiveOf(t *testing.T) {
	p := smallPoint(t)
	if got := ObjectiveOf(p); got != TTFTP99 {
		t.Errorf("without an SLO: %+v, want p99 TTFT", got)
	}
	p.File.SLO.TTFTMs = 500
	if got := ObjectiveOf(p); got != GoodputFraction {
		t.Errorf("with an SLO: %+v, want goodput", got)
	}
	v, err := SimRunner(p, GoodputFraction, 1)(context.Background(), []Trial{{sweep.PolicySpec{Name: "kv-router"}, 0}})
	if err != nil || v[0] < 0 || v[0] > 1 {
		t.Errorf("goodput %v, %v: want a share in [0, 1]", v, err)
	}
}
