package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"kvroute/gpumodel"
	"kvroute/internal/calibrate"
	"kvroute/internal/emulate"
	"kvroute/internal/loadgen"
	"kvroute/sweep"
	"kvroute/workloads"
)

// calibrationFull runs the emulator test at full size (go test ./cmd/simulate -run
// TestCalibrateRecoversEmulatedFleet -calibrate-full): a few minutes of wall time.
var calibrationFull = flag.Bool("calibrate-full", false, "run the calibration test at full size")

// calSize is one size of the emulator test: the fit and held-out workloads.
type calSize struct {
	fitN, holdN       int
	fitRate, holdRate float64
}

// unknownFleet is the "unknown" replica the test measures: an H100 whose efficiencies are
// 30%, 35% and 25% below the catalog's (prefill MFU, decode MFU, memory).
func unknownFleet(t *testing.T) gpumodel.Deployment {
	t.Helper()
	g, err := gpumodel.LookupGPU("H100-SXM-80GB")
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpumodel.LookupModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	g.Name = "unknown-h100"
	g.Efficiency.PrefillMFU *= 0.70
	g.Efficiency.DecodeMFU *= 0.65
	g.Efficiency.Memory *= 0.75
	d := gpumodel.DefaultDeployment(g, m, 1)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

// calWorkload is single-turn ShareGPT-like chat, Poisson arrivals.
func calWorkload(n int, rate float64, prompt, output int) workloads.Config {
	return workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat, MeanTurns: 1, MaxTurns: 1,
			PromptTokens: prompt, OutputTokens: output, MaxMessageTokens: 4096},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: rate},
		Requests: n,
	}
}

// measured is one emulator run: the vLLM JSON, and the mean of how much longer each request's
// TTFT was at the client than on the emulator's engine clock (the HTTP hop plus whatever the
// host delayed).
type measured struct {
	json []byte
	hop  time.Duration
}

// measureEmulator serves d with the emulator in real time on loopback, sends w with loadgen
// and returns the run as `vllm bench serve --save-result --save-detailed` JSON.
func measureEmulator(d gpumodel.Deployment, w workloads.Config, seed uint64) (measured, error) {
	cfg := emulate.DefaultConfig()
	cfg.Addr, cfg.Deployment, cfg.Model = "127.0.0.1:0", &d, "llama-3.1-8b"
	rep, err := emulate.NewReplica(cfg)
	if err != nil {
		return measured{}, err
	}
	ctx := context.Background()
	if err := rep.Start(ctx); err != nil {
		return measured{}, err
	}
	defer rep.Close()
	stream, err := workloads.Build(w, seed, workloads.WithText(true))
	if err != nil {
		return measured{}, err
	}
	defer stream.Close()
	opts := loadgen.DefaultOptions()
	opts.Target, opts.Model = "http://"+rep.Addr(), "llama-3.1-8b"
	bench := loadgen.NewBench(loadgen.BenchInfo{Date: "20260101-000000", Backend: "openai-chat", EndpointType: "openai-chat",
		ModelID: "llama-3.1-8b", RequestRate: w.Arrival.Rate, Burstiness: 1})
	var hop time.Duration
	n := 0
	st, err := loadgen.Run(ctx, opts, stream, loadgen.Sink{Result: func(r *loadgen.Result) {
		bench.Add(r)
		if t, ok := r.Record.TTFT(); ok && r.EngineTTFT > 0 {
			hop, n = hop+t-r.EngineTTFT, n+1
		}
	}})
	if err != nil {
		return measured{}, err
	}
	var b bytes.Buffer
	err = bench.WriteJSON(&b, st.Elapsed)
	return measured{json: b.Bytes(), hop: hop / time.Duration(max(n, 1))}, err
}

// maxHop is the mean client-side TTFT excess over the engine's above which the test does not
// trust a measurement: the host, not the replica, would be what it measured. The runs that
// passed on a busy 2-core VM had hops of 2–3 ms, and 7 ms under -race (held-out errors of
// 2–3%); under -race at a load average of 28 the hop reached 222 ms.
const maxHop = 8 * time.Millisecond

// TestCalibrateRecoversEmulatedFleet is issue 38's honest test: the emulator, serving an H100
// whose efficiencies are 25–35% off the catalog's, stands in for an unknown fleet; loadgen
// measures it over real HTTP; `simulate -calibrate` fits the catalog's H100 to one workload
// and must reproduce a second, held-out workload's mean TTFT and TPOT within 5%.
//
// The race build measures fewer requests and runs a shorter search. A measurement whose
// clients saw TTFT more than maxHop above the emulator's own is of the host, not the replica:
// the test skips it.
func TestCalibrateRecoversEmulatedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time emulator runs; skipped with -short")
	}
	size, evals := calSize{fitN: 80, holdN: 120, fitRate: 4, holdRate: 8}, "150"
	switch {
	case *calibrationFull:
		size = calSize{fitN: 600, holdN: 400, fitRate: 4, holdRate: 4}
	case raceEnabled:
		size, evals = calSize{fitN: 60, holdN: 40, fitRate: 4, holdRate: 4}, "60"
	}
	d := unknownFleet(t)
	dir := t.TempDir()
	fitFile, holdFile := filepath.Join(dir, "fit.json"), filepath.Join(dir, "holdout.json")
	start := time.Now()
	var wg sync.WaitGroup // two replicas, measured at once: the wall time of the longer run
	var fitRun, holdRun measured
	var fitErr, holdErr error
	wg.Go(func() { fitRun, fitErr = measureEmulator(d, calWorkload(size.fitN, size.fitRate, 2000, 60), 1) })
	wg.Go(func() { holdRun, holdErr = measureEmulator(d, calWorkload(size.holdN, size.holdRate, 1000, 100), 2) })
	wg.Wait()
	if err := errors.Join(fitErr, holdErr); err != nil {
		t.Fatal(err)
	}
	if hop := max(fitRun.hop, holdRun.hop); hop > maxHop {
		t.Skipf("host too busy to measure the emulator: client TTFT exceeds the engine's by %v on average (limit %v)", hop, maxHop)
	}
	writeFile(t, fitFile, fitRun.json)
	writeFile(t, holdFile, holdRun.json)
	took := time.Since(start)
	out := filepath.Join(dir, "out")
	stdout := calibrateCLI(t, fitFile, holdFile, out, evals)
	t.Logf("measured in %v (client TTFT over the engine's: %v and %v), fitted in %v\n%s", took.Round(time.Millisecond),
		fitRun.hop.Round(time.Microsecond), holdRun.hop.Round(time.Microsecond), (time.Since(start) - took).Round(time.Millisecond), stdout)
	checkHeldOut(t, out, holdFile)
}

// calibrateCLI runs simulate -calibrate on an H100 of Llama-3.1-8B with fit and held-out
// inputs, writing to out, and returns what it printed.
func calibrateCLI(t *testing.T, fit, hold, out, evals string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"-calibrate", fit, "-holdout", hold, "-base", "H100-SXM-80GB/llama-3.1-8b", "-out", out, "-evals", evals}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("simulate %v: exit %d\n%s", args, code, stderr.String())
	}
	return stdout.String()
}

// calibratedGPU returns the GPU the calibration in out wrote to its catalog.
func calibratedGPU(t *testing.T, out string) gpumodel.GPU {
	t.Helper()
	cat, err := sweep.LoadCatalog(filepath.Join(out, "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := cat.GPU("H100-SXM-80GB-calibrated")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkHeldOut replays the held-out measurement on the GPU of the written catalog and checks
// mean TTFT and TPOT within 5% of what the emulator measured, where the catalog's H100 was
// more than 5% off.
func checkHeldOut(t *testing.T, out, holdFile string) {
	t.Helper()
	g := calibratedGPU(t, out)
	m, _ := gpumodel.LookupModel("llama-3.1-8b")
	d := gpumodel.DefaultDeployment(g, m, 1)
	var fleet struct {
		Router struct {
			NetworkDelay time.Duration `yaml:"network_delay"`
		} `yaml:"router"`
	}
	b, err := os.ReadFile(filepath.Join(out, "fleet.yaml"))
	if err == nil {
		err = yaml.Unmarshal(b, &fleet)
	}
	if err != nil {
		t.Fatal(err)
	}
	ms, err := readMeasurements([]string{holdFile})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := calibrate.Replay(context.Background(), calibrate.Replica{Deployment: d, Model: m.Name, NetworkDelay: fleet.Router.NetworkDelay}, ms[0])
	if err != nil {
		t.Fatal(err)
	}
	base, err := calibrate.Replay(context.Background(), calibrate.Replica{Deployment: gpumodel.DefaultDeployment(g0(t), m, 1), Model: m.Name}, ms[0])
	if err != nil {
		t.Fatal(err)
	}
	meas, got, before := calibrate.StatsOf(ms[0].Requests, nil), calibrate.StatsOf(sim.Requests, nil), calibrate.StatsOf(base.Requests, nil)
	for _, c := range []struct {
		name              string
		want, got, before float64
	}{
		{"TTFT mean", meas.TTFTMean, got.TTFTMean, before.TTFTMean}, {"TPOT mean", meas.TPOTMean, got.TPOTMean, before.TPOTMean},
	} {
		e, eb := calibrate.RelativeError(c.got, c.want), calibrate.RelativeError(c.before, c.want)
		if math.Abs(eb) <= 0.05 {
			t.Errorf("held-out %s: the catalog's H100 is already within %+.1f%%: the test does not test the fit", c.name, 100*eb)
		}
		if math.Abs(e) > 0.05 {
			t.Errorf("held-out %s: simulated %.2f ms, measured %.2f ms: %+.1f%%, want within 5%%", c.name, c.got, c.want, 100*e)
		}
	}
}

// g0 is the catalog's H100, the GPU the fit starts from.
func g0(t *testing.T) gpumodel.GPU {
	t.Helper()
	g, err := gpumodel.LookupGPU("H100-SXM-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCalibrateArguments(t *testing.T) {
	bench := filepath.Join("..", "..", "internal", "calibrate", "testdata", "bench_small.json")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no base", []string{"-calibrate", bench}, 2, "-base"},
		{"unknown gpu", []string{"-calibrate", bench, "-base", "no-such-gpu/llama-3.1-8b"}, 2, "no-such-gpu"},
		{"missing file", []string{"calibrate", "-base", "H100-SXM-80GB", "nope.json"}, 2, "nope.json"},
		{"bad file", []string{"-calibrate", "calibrate.go", "-base", "H100-SXM-80GB"}, 2, "calibrate.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, io.Discard, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCalibrateExample runs examples/calibrate/README.md's command (with a short search) and
// checks that the example parses whole and that the command writes a catalog the sweep loader
// reads, fleet.yaml and report.md.
func TestCalibrateExample(t *testing.T) {
	out := t.TempDir()
	bench := filepath.Join("..", "..", "examples", "calibrate", "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-calibrate", bench, "-base", "H100-SXM-80GB/llama-3.1-8b", "-out", out, "-evals", "40"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	cat, err := sweep.LoadCatalog(filepath.Join(out, "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.GPU("H100-SXM-80GB-calibrated"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "fleet.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	ms, err := readMeasurements([]string{bench})
	if err != nil || len(ms) != 1 || len(ms[0].Requests) != 60 || len(ms[0].ITLs) == 0 {
		t.Fatalf("example holds %d measurements (%v), want one of 60 requests with token gaps", len(ms), err)
	}
}
