package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// pdRatioTolerance is how far a simulated P/D-over-aggregated ratio may sit from the
// published one: within 1.5× either way.
const pdRatioTolerance = 1.5

// pdRun is one run of a published P/D scenario: its fleet split, rate, replication and the
// metrics the checks read.
type pdRun struct {
	Name        string  `json:"name"`
	Policy      string  `json:"policy"`
	RequestRate float64 `json:"request_rate"`
	Replication int     `json:"replication"`
	Scenario    struct {
		Split string `json:"fleet_split"`
	} `json:"scenario"`
	Metrics struct {
		Requests  int `json:"requests"`
		Completed int `json:"completed"`
		TTFT      struct {
			Mean float64 `json:"mean"`
		} `json:"ttft_ms"`
		ITL struct {
			Mean float64 `json:"mean"`
		} `json:"itl_ms"`
		E2E struct {
			Mean float64 `json:"mean"`
		} `json:"e2e_ms"`
		Goodput *struct {
			Fraction float64 `json:"fraction"`
		} `json:"goodput"`
	} `json:"metrics"`
}

// pdScenario runs examples/published/<file> at full size and returns its runs.
func pdScenario(t *testing.T, file string) []pdRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	runSim(t, "-config", filepath.Join("..", "..", "examples", "published", file), "-out", out, "-quiet")
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct{ Runs []pdRun }
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	return sum.Runs
}

// checkPDRatio fails unless got/want lies within pdRatioTolerance of 1 and on the published
// side of 1 (the direction).
func checkPDRatio(t *testing.T, what string, got, want float64) {
	t.Helper()
	t.Logf("%s: simulated %.3f, published %.3f", what, got, want)
	if (got > 1) != (want > 1) {
		t.Errorf("%s: simulated ratio %.3f, published %.3f: the other direction", what, got, want)
	}
	if r := got / want; r > pdRatioTolerance || r < 1/pdRatioTolerance {
		t.Errorf("%s: simulated ratio %.3f is %.2f× the published %.3f (tolerance %.1f×)", what, got, r, want, pdRatioTolerance)
	}
}

// TestPublishedPDFidelity runs the published P/D scenarios at full size and checks the
// published ratios of the disaggregated fleet's figures to the colocated fleet's
// (docs/fidelity.md). DistServe's goodput per GPU is held in direction and within 1.5×.
// llm-d's guide is held in direction on mean E2E and ITL only; its ratios (−59%, −80%) are
// not reached and its TTFT rise (+117%) not reproduced, because its aggregated column comes
// from an earlier, slower stack than its P/D column (docs/fidelity.md says by how much).
func TestPublishedPDFidelity(t *testing.T) {
	switch {
	case testing.Short():
		t.Skip("fidelity scenarios are slow")
	case raceEnabled:
		t.Skip("full-size scenarios take minutes under -race; make fidelity runs them without it")
	}
	t.Run("llm-d-pd-disaggregation", func(t *testing.T) {
		runs := pdScenario(t, "llm-d-pd-disaggregation.yaml")
		find := func(policy, split string) pdRun {
			i := slices.IndexFunc(runs, func(r pdRun) bool { return r.Policy == policy && r.Scenario.Split == split })
			if i < 0 {
				t.Fatalf("no %s run on the %s fleet", policy, split)
			}
			r := runs[i]
			if r.Metrics.Completed != r.Metrics.Requests {
				t.Errorf("%s: %d of %d requests completed", r.Name, r.Metrics.Completed, r.Metrics.Requests)
			}
			return r
		}
		// The published comparison: a Kubernetes Service over the aggregated fleet against
		// llm-d's router over the split one.
		agg, pd := find("random", "aggregated"), find("llm-d-pd", "8P(tp1)+2D(tp4)")
		for _, c := range []struct {
			what      string
			got, want float64
			held      bool // in direction
			within    bool // and within 1.5× of the published ratio
		}{
			{"mean E2E", pd.Metrics.E2E.Mean / agg.Metrics.E2E.Mean, 2.78 / 6.7, true, true},
			{"mean ITL", pd.Metrics.ITL.Mean / agg.Metrics.ITL.Mean, 4.9 / 25, true, false},
			{"mean TTFT", pd.Metrics.TTFT.Mean / agg.Metrics.TTFT.Mean, 1157.0 / 532, false, false},
		} {
			t.Logf("%s, P/D over aggregated: simulated %.3f, published %.3f", c.what, c.got, c.want)
			if c.held && c.got >= 1 {
				t.Errorf("%s, P/D over aggregated: simulated %.3f, published %.3f: P/D should lower it", c.what, c.got, c.want)
			}
			if off := max(c.got/c.want, c.want/c.got); c.within && off > 1.5 {
				t.Errorf("%s, P/D over aggregated: simulated %.3f is %.2f× off the published %.3f (bar 1.5×)", c.what, c.got, off, c.want)
			}
		}
	})
	t.Run("distserve-2p1d", func(t *testing.T) {
		split := pdScenario(t, "distserve-2p1d.yaml")
		v0 := goodputRate(t, pdScenario(t, "distserve-colocated-v0.yaml"), "aggregated")
		v1, pd := goodputRate(t, split, "aggregated"), goodputRate(t, split, "2P+1D")
		t.Logf("goodput (90%% within the SLO) on 3 GPUs: colocated on vLLM V0 %.2f requests/s, on V1 %.2f; 2P+1D %.2f", v0, v1, pd)
		checkPDRatio(t, "goodput per GPU, 2P1D over colocated (V0, DistServe's baseline)", pd/v0, 10/(3*1.6))
		if pd <= v1 {
			t.Errorf("2P+1D's goodput %.2f is not above the colocated V1 fleet's %.2f", pd, v1)
		}
	})
}

// goodputRate returns DistServe's goodput of a split: the highest rate at which at least 90%
// of requests met the SLO (the mean share over replications), interpolated linearly between
// the configured rates around the crossing.
func goodputRate(t *testing.T, runs []pdRun, split string) float64 {
	t.Helper()
	share := map[float64][]float64{}
	for _, r := range runs {
		if (r.Scenario.Split == split || r.Scenario.Split == "" && split == "aggregated") && r.Metrics.Goodput != nil {
			share[r.RequestRate] = append(share[r.RequestRate], r.Metrics.Goodput.Fraction)
		}
	}
	var rates []float64
	for r := range share {
		rates = append(rates, r)
	}
	slices.Sort(rates)
	if len(rates) < 2 {
		t.Fatalf("%s: %d rates with goodput, want a sweep", split, len(rates))
	}
	mean := func(r float64) float64 {
		s := 0.0
		for _, v := range share[r] {
			s += v
		}
		return s / float64(len(share[r]))
	}
	const attain = 0.9
	if mean(rates[0]) < attain {
		t.Fatalf("%s: only %.2f of requests met the SLO at the lowest rate, %g", split, mean(rates[0]), rates[0])
	}
	for i := 1; i < len(rates); i++ {
		lo, hi := mean(rates[i-1]), mean(rates[i])
		if hi < attain {
			return rates[i-1] + (rates[i]-rates[i-1])*(lo-attain)/math.Max(lo-hi, 1e-9)
		}
	}
	t.Fatalf("%s: %.2f of requests met the SLO at the highest rate, %g: raise the rates", split, mean(rates[len(rates)-1]), rates[len(rates)-1])
	return 0
}
