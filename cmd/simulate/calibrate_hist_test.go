package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/calibrate"
	"kvroute/internal/emulate"
	"kvroute/internal/loadgen"
	"kvroute/results"
	"kvroute/results/report"
	"kvroute/workloads"
)

// measureLoadgenDir serves d with the emulator in real time, sends w with loadgen, and
// writes what cmd/loadgen writes to dir: summary.json, requests.csv and vllm-metrics.json (the
// server's histograms scraped before and after).
func measureLoadgenDir(d gpumodel.Deployment, w workloads.Config, seed uint64, dir string) error {
	cfg := emulate.DefaultConfig()
	cfg.Addr, cfg.Deployment, cfg.Model = "127.0.0.1:0", &d, "llama-3.1-8b"
	rep, err := emulate.NewReplica(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := rep.Start(ctx); err != nil {
		return err
	}
	defer rep.Close()
	stream, err := workloads.Build(w, seed, workloads.WithText(true))
	if err != nil {
		return err
	}
	defer stream.Close()
	urls := []string{"http://" + rep.Addr() + "/metrics"}
	before := loadgen.Scrape(ctx, nil, urls)
	var csv bytes.Buffer
	rows, err := results.NewRequestsCSV(&csv)
	if err != nil {
		return err
	}
	col := results.NewCollector(results.CollectorOpts{Name: "live"})
	opts := loadgen.DefaultOptions()
	opts.Target, opts.Model = "http://"+rep.Addr(), "llama-3.1-8b"
	var werr error
	if _, err := loadgen.Run(ctx, opts, stream, loadgen.Sink{Result: func(r *loadgen.Result) {
		col.Add(&r.Record)
		werr = errors.Join(werr, rows.Write("live", &r.Record))
	}}); err != nil {
		return err
	}
	after := loadgen.Scrape(ctx, nil, urls)
	var summary, metrics bytes.Buffer
	err = errors.Join(werr, rows.Flush(), report.WriteSummaryJSON(&summary, []results.Run{col.Run()}),
		loadgen.WriteMetricsFile(&metrics, []results.RunHistograms{{Run: "live", Servers: loadgen.HistogramDeltas(before, after)}}))
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{results.RequestsFile: csv.Bytes(), results.SummaryJSONFile: summary.Bytes(), results.VLLMMetricsFile: metrics.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// TestCalibrateFromServerHistograms is the loadgen-directory variant of the emulator test:
// loadgen records the emulated replica's vLLM histograms, `simulate -calibrate` fits the
// servers' own TTFT, TPOT and E2E means (no network delay), and a held-out workload's
// server-side mean TTFT and TPOT must come out within 5% with the fitted GPU, where the
// catalog's H100 was further off. Reduced size: about 15 s of measuring.
func TestCalibrateFromServerHistograms(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time emulator runs; skipped with -short")
	}
	size, evals := calSize{fitN: 60, holdN: 40, fitRate: 4, holdRate: 4}, "120"
	if raceEnabled {
		size, evals = calSize{fitN: 40, holdN: 30, fitRate: 4, holdRate: 4}, "60"
	}
	d := unknownFleet(t)
	dir := t.TempDir()
	fitDir, holdDir := filepath.Join(dir, "fit"), filepath.Join(dir, "holdout")
	for _, p := range []string{fitDir, holdDir} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	var fitErr, holdErr error
	wg.Go(func() { fitErr = measureLoadgenDir(d, calWorkload(size.fitN, size.fitRate, 2000, 60), 1, fitDir) })
	wg.Go(func() { holdErr = measureLoadgenDir(d, calWorkload(size.holdN, size.holdRate, 1000, 100), 2, holdDir) })
	wg.Wait()
	if err := errors.Join(fitErr, holdErr); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	out := filepath.Join(dir, "out")
	stdout := calibrateCLI(t, fitDir, holdDir, out, evals)
	t.Logf("measured in %v, fitted in %v\n%s", took.Round(time.Millisecond), (time.Since(start) - took).Round(time.Millisecond), stdout)
	checkServerHeldOut(t, out, holdDir)
}

// checkServerHeldOut replays the held-out directory on the written catalog's GPU and on the
// catalog's H100 and compares their server-side means with the held-out histograms'.
func checkServerHeldOut(t *testing.T, out, holdDir string) {
	t.Helper()
	g := calibratedGPU(t, out)
	ms, err := readMeasurements([]string{holdDir})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Server == nil {
		t.Fatalf("held-out directory read as %d measurements, server stats %v: want one with its histograms", len(ms), ms)
	}
	m, _ := gpumodel.LookupModel("llama-3.1-8b")
	means := func(gpu gpumodel.GPU) (ttft, tpot float64) {
		sim, err := calibrate.Replay(context.Background(), calibrate.Replica{Deployment: gpumodel.DefaultDeployment(gpu, m, 1), Model: m.Name}, ms[0])
		if err != nil {
			t.Fatal(err)
		}
		var itl time.Duration
		for _, d := range sim.ITLs {
			itl += d
		}
		s := calibrate.StatsOf(sim.Requests, nil)
		return s.TTFTMean, float64(itl) / 1e6 / float64(len(sim.ITLs))
	}
	gotTTFT, gotTPOT := means(g)
	baseTTFT, baseTPOT := means(g0(t))
	meas := ms[0].Server
	for _, c := range []struct {
		name              string
		want, got, before float64
	}{
		{"server TTFT mean", meas.TTFT.MeanMS(), gotTTFT, baseTTFT}, {"server TPOT mean", meas.TPOT.MeanMS(), gotTPOT, baseTPOT},
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
