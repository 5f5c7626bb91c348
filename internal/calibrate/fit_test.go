package calibrate

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"kvroute/gpumodel"
)

// testReplica is one Llama-3.1-8B replica on an H100 with the catalog's efficiencies.
func testReplica(t *testing.T) Replica {
	t.Helper()
	d, err := Setup{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b"}.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	return Replica{Deployment: d, Model: "llama-3.1-8b"}
}

// syntheticRun returns n requests with Poisson arrivals at rate per second and log-normal
// lengths around prompt and output tokens.
func syntheticRun(name string, n int, rate float64, prompt, output int, seed uint64) Measurement {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := Measurement{Source: name}
	at := 0.0
	for range n {
		at += rng.ExpFloat64() / rate
		ln := func(mean int) int { return max(4, int(float64(mean)*math.Exp(0.6*rng.NormFloat64()-0.18))) }
		m.Requests = append(m.Requests, Observed{Arrival: seconds(at), PromptTokens: ln(prompt), OutputTokens: ln(output)})
	}
	return m
}

// measure replays m on rep and returns it with the simulated latencies as the measurement.
func measure(t *testing.T, rep Replica, m Measurement) Measurement {
	t.Helper()
	sim, err := Replay(context.Background(), rep, m)
	if err != nil {
		t.Fatal(err)
	}
	m.Requests, m.ITLs = sim.Requests, sim.ITLs
	sortByArrival(m.Requests)
	return m
}

func perturbed(rep Replica, prefill, decode, memory float64) Replica {
	e := &rep.Deployment.GPU.Efficiency
	e.PrefillMFU, e.DecodeMFU, e.Memory = e.PrefillMFU*prefill, e.DecodeMFU*decode, e.Memory*memory
	return rep
}

// TestFitRecoversPerturbedReplica measures a replica whose efficiencies are 25–35% below the
// catalog's in the simulator itself, fits from the catalog, and checks a held-out workload.
func TestFitRecoversPerturbedReplica(t *testing.T) {
	base := testReplica(t)
	truth := perturbed(base, 0.7, 0.75, 0.65)
	truth.NetworkDelay = 2 * time.Millisecond
	fit := measure(t, truth, syntheticRun("fit", 120, 6, 1500, 120, 1))
	hold := measure(t, truth, syntheticRun("held-out", 80, 9, 800, 200, 2))
	r, err := Fit(context.Background(), FitConfig{Base: base, Fit: []Measurement{fit}, Holdout: []Measurement{hold}})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Sets[1]
	for _, c := range []struct {
		name                string
		meas, before, after float64
	}{
		{"held-out TTFT mean", h.Measured.TTFTMean, h.Before.TTFTMean, h.After.TTFTMean},
		{"held-out TPOT mean", h.Measured.TPOTMean, h.Before.TPOTMean, h.After.TPOTMean},
	} {
		if e := math.Abs(RelativeError(c.after, c.meas)); e > 0.05 {
			t.Errorf("%s: after the fit %.2f ms, measured %.2f ms: error %.1f%% > 5%%", c.name, c.after, c.meas, 100*e)
		}
		if eb := math.Abs(RelativeError(c.before, c.meas)); eb < 0.1 {
			t.Errorf("%s: before the fit already within %.1f%%: the test does not test the fit", c.name, 100*eb)
		}
	}
	for _, v := range []float64{r.After.Efficiency.PrefillMFU, r.After.Efficiency.DecodeMFU, r.After.Efficiency.Memory} {
		if !(v > 0 && v <= 1) {
			t.Errorf("fitted efficiency %v outside (0, 1]", v)
		}
	}
	var rep bytes.Buffer
	if err := WriteReport(&rep, ReportInfo{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b", HoldoutEvery: 5}, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d evaluations, truth %+v, fitted %+v\n%s", r.Evaluations, truth.Deployment.GPU.Efficiency, r.After, rep.String())
}

// TestFitSplitHoldsOutEveryFifth checks the held-out stride: with no Holdout, the sets
// partition each measurement's requests.
func TestFitSplitHoldsOutEveryFifth(t *testing.T) {
	base := testReplica(t)
	m := measure(t, perturbed(base, 0.8, 1, 0.8), syntheticRun("run", 23, 5, 300, 30, 3))
	r, err := Fit(context.Background(), FitConfig{Base: base, Fit: []Measurement{m}, MaxEvaluations: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := [2]int{r.Sets[0].Measured.Requests, r.Sets[1].Measured.Requests}, [2]int{19, 4}; got != want {
		t.Errorf("fit/held-out requests %v, want %v", got, want)
	}
	if r.Evaluations > 3 {
		t.Errorf("%d evaluations, want at most 3", r.Evaluations)
	}
}

func TestWriteCatalogLoads(t *testing.T) {
	var b bytes.Buffer
	e := gpumodel.Efficiency{PrefillMFU: 0.41234567, DecodeMFU: 0.3, Memory: 0.6, Link: 0.8}
	if err := WriteCatalog(&b, "my-h100", "H100-SXM-80GB", e); err != nil {
		t.Fatal(err)
	}
	cat, err := gpumodel.LoadCatalog(&b, "catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	g, err := cat.GPU("my-h100")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := gpumodel.LookupGPU("H100-SXM-80GB")
	// The expert-multiply efficiency is not fitted: the entry keeps its base's.
	want := gpumodel.Efficiency{PrefillMFU: 0.4123, DecodeMFU: 0.3, Memory: 0.6, Link: 0.8, ExpertMFU: base.Efficiency.ExpertMFU}
	if g.Efficiency != want {
		t.Errorf("loaded efficiency %+v, want %+v", g.Efficiency, want)
	}
	if g.PeakFLOPS != base.PeakFLOPS || g.MemoryBandwidth != base.MemoryBandwidth {
		t.Errorf("catalog entry did not start from its base")
	}
}

// TestFitDeterministic runs one calibration twice: the same inputs give the same report,
// byte for byte.
func TestFitDeterministic(t *testing.T) {
	base := testReplica(t)
	m := measure(t, perturbed(base, 0.8, 0.9, 0.7), syntheticRun("run", 30, 5, 600, 40, 4))
	var out [2]bytes.Buffer
	for i := range out {
		r, err := Fit(context.Background(), FitConfig{Base: base, Fit: []Measurement{m}, MaxEvaluations: 12})
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteReport(&out[i], ReportInfo{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b", HoldoutEvery: 5}, r); err != nil {
			t.Fatal(err)
		}
	}
	if out[0].String() != out[1].String() {
		t.Errorf("two runs differ:\n%s\n---\n%s", out[0].String(), out[1].String())
	}
}
