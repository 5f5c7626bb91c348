package sweep

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim/cluster"
)

func TestFleetLayouts(t *testing.T) {
	tests := []struct {
		name, fleet string
		wantLabel   string
		wantTP      []int // per replica
		wantErrKey  string
	}{
		{"no pools", "{replicas: 4, gpu: H100, model: llama-3.1-8b}", "aggregated", []int{1, 1, 1, 1}, ""},
		{"split aggregated", "{replicas: 3, gpu: H100, model: llama-3.1-8b, split: aggregated}", "aggregated", []int{1, 1, 1}, ""},
		{"split", "{replicas: 8, gpu: H100, model: llama-3.1-8b, split: 1P+2D}", "1P+2D", []int{1, 1, 1}, ""},
		{"split with tp", "{gpu: H100, model: llama-3.1-8b, split: 2P(tp1)+1D(tp2)}", "2P(tp1)+1D(tp2)", []int{1, 1, 2}, ""},
		{"pools inherit", "{gpu: H100, model: llama-3.1-8b, tp: 2, pools: [{role: decode, replicas: 1, tp: 4}, {role: prefill, replicas: 2}]}",
			"1D(tp4)+2P(tp2)", []int{4, 2, 2}, ""},
		{"bad split", "{gpu: H100, model: llama-3.1-8b, split: 4X+4D}", "", nil, "fleet.split"},
		{"split and pools", "{gpu: H100, model: llama-3.1-8b, split: 1P+1D, pools: [{role: prefill, replicas: 1}]}", "", nil, "fleet.split"},
		{"no decode pool", "{gpu: H100, model: llama-3.1-8b, pools: [{role: prefill, replicas: 1}]}", "", nil, "fleet.pools"},
		{"bad role", "{gpu: H100, model: llama-3.1-8b, pools: [{role: both, replicas: 1}, {role: decode, replicas: 1}]}", "", nil, "fleet.pools[0].role"},
		{"bad pool key", "{gpu: H100, model: llama-3.1-8b, pools: [{role: prefill, replicas: 1, tp: -1}, {role: decode, replicas: 1}]}", "", nil, "fleet.pools[0].tp"},
		{"bad failure policy", "{gpu: H100, model: llama-3.1-8b, split: 1P+1D, kv_transfer: {failure_policy: retry}}", "", nil, "fleet.kv_transfer.failure_policy"},
		{"v0 has no nixl", "{gpu: H100, model: llama-3.1-8b, split: 1P+1D, vllm: v0.6, max_num_batched_tokens: 4096}", "", nil, "fleet.vllm"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fl, _, err := ReadFleet([]byte("fleet: "+tc.fleet+"\n"), "f.yaml")
			if err != nil {
				t.Fatal(err)
			}
			engines, err := fl.Engines(gpumodel.DefaultCatalog(), "fleet")
			if tc.wantErrKey != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrKey) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErrKey)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fl.SplitLabel(); got != tc.wantLabel {
				t.Errorf("label %q, want %q", got, tc.wantLabel)
			}
			var tps []int
			for _, e := range engines {
				tps = append(tps, e.Deployment.TP)
			}
			if fmt.Sprint(tps) != fmt.Sprint(tc.wantTP) {
				t.Errorf("replica TPs %v, want %v", tps, tc.wantTP)
			}
		})
	}
}

// TestSplitAxisComparesLayoutsInOneFile runs one file whose fleet.split axis holds an
// aggregated fleet and a split of the same GPUs: the aggregated runs record no P/D field
// but fleet_split, the split runs record their prefill endpoints and transfers.
func TestSplitAxisComparesLayoutsInOneFile(t *testing.T) {
	src := strings.Replace(base, "replicas: 2,", "replicas: 2, split: [aggregated, 1P+1D],", 1)
	points, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jobs := Plan(points)
	if len(jobs) != 4 || !jobs[0].PDColumns {
		t.Fatalf("%d jobs (PD columns %v), want 4 with the P/D columns", len(jobs), jobs[0].PDColumns)
	}
	for _, j := range []Job{jobs[0], jobs[2]} {
		var rows strings.Builder
		run, err := j.Execute(context.Background(), &rows, func() {})
		if err != nil {
			t.Fatal(err)
		}
		split := j.Point.Fleet.Split
		if got := run.Scenario["fleet_split"]; got != split {
			t.Errorf("%s: fleet_split %v, want %s", j.Name, got, split)
		}
		lines := strings.Split(strings.TrimSpace(rows.String()), "\n")
		if !strings.HasSuffix(lines[0], ",prefill_endpoint,kv_transfer_ms") {
			t.Fatalf("header %q lacks the P/D columns", lines[0])
		}
		remote := strings.Contains(lines[1], ",replica-0,") && !strings.HasSuffix(lines[1], ",,")
		if remote != (split != SplitAggregated) {
			t.Errorf("%s: row %q: prefilled remotely %v", j.Name, lines[1], remote)
		}
	}
}

func TestAggregatedSweepHasNoPDColumns(t *testing.T) {
	points, err := Parse([]byte(base), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j := Plan(points)[0]
	var rows strings.Builder
	run, err := j.Execute(context.Background(), &rows, func() {})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := run.Scenario["fleet_split"]; ok || strings.Contains(rows.String(), "prefill_endpoint") {
		t.Fatal("an aggregated sweep records P/D fields")
	}
}

// TestSplitClusterPairsReplicasWithRoles checks that a split fleet's cluster configuration
// gives each replica the role of the pool it comes from, in file order, whatever the order
// of the roles, with the fleet's KV transfer.
func TestSplitClusterPairsReplicasWithRoles(t *testing.T) {
	src := strings.Replace(base, "replicas: 2,", "pools: [{role: decode, replicas: 1, tp: 2}, {role: prefill, replicas: 2}], "+
		"kv_transfer: {bandwidth_gbps: 200, base_latency: 1ms},", 1)
	points, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := points[0].clusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Roles) != len(c.Replicas) {
		t.Fatalf("%d roles for %d replicas", len(c.Roles), len(c.Replicas))
	}
	var got []string
	for i, r := range c.Replicas {
		role := map[cluster.Role]string{cluster.RolePrefill: "P", cluster.RoleDecode: "D"}[c.Roles[i]]
		got = append(got, fmt.Sprintf("%s(tp%d)", role, r.Deployment.TP))
	}
	if want := "[D(tp2) P(tp1) P(tp1)]"; fmt.Sprint(got) != want {
		t.Errorf("replicas %v, want %s", got, want)
	}
	if wantKV := (cluster.KVTransfer{Gbps: 200, BaseLatency: time.Millisecond}); c.KVTransfer != wantKV {
		t.Errorf("kv transfer %+v, want %+v", c.KVTransfer, wantKV)
	}
}

// FuzzParseSplit checks that any split is read or refused without a panic, and that a split
// read names itself back: the same pools, in order.
func FuzzParseSplit(f *testing.F) {
	for _, s := range []string{"aggregated", "4P+4D", "8P(tp1)+2D(tp4)", "1D+1P+2D", "P+D", "4P+", "0P+1D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pools, err := parseSplit(s, "fleet")
		if err != nil || pools == nil {
			return
		}
		fl := FleetConfig{Split: s}
		if _, err := fl.Layout("fleet"); err != nil {
			return
		}
		label := fl.SplitLabel()
		again, err := parseSplit(label, "fleet")
		if err != nil || len(again) != len(pools) {
			t.Fatalf("%q names itself %q, which reads as %v (%v)", s, label, again, err)
		}
		for i := range pools {
			if again[i].Role != pools[i].Role || again[i].Replicas != pools[i].Replicas {
				t.Fatalf("%q names itself %q: pool %d %+v, want %+v", s, label, i, again[i], pools[i])
			}
		}
	})
}
