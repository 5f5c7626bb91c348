package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/calibrate"
	"kvroute/results"
	"kvroute/sim/engine"
)

// calOptions are the calibration's flags.
type calOptions struct {
	inputs, holdout, base, name, vllm, out string
	tp, every, evals, maxSeqs, maxTokens   int
	fitDelay                               bool
}

// calibrateFlags defines the calibration's flags.
func calibrateFlags(stderr io.Writer) (*flag.FlagSet, *calOptions) {
	o := &calOptions{}
	fs := flag.NewFlagSet("simulate calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.inputs, "calibrate", "", "comma-separated `PATHS`: measurements to fit: vllm bench serve --save-result --save-detailed JSON files, or cmd/loadgen results directories (summary.json + requests.csv, and vllm-metrics.json when loadgen scraped vLLM's histograms: then the fit uses the servers' own latencies); more may follow as arguments")
	fs.StringVar(&o.holdout, "holdout", "", "comma-separated `PATHS`: measurements (same formats) kept out of the fit to check it; empty holds out 1 request in -holdout-every of each input")
	fs.IntVar(&o.every, "holdout-every", 5, "without -holdout, every N-th request of each input is held out (N >= 2)")
	fs.StringVar(&o.base, "base", "", "GPU[/MODEL]: the catalog GPU to start from (required) and the model (default: the input's model_id)")
	fs.IntVar(&o.tp, "tp", 1, "tensor-parallel size of the measured replica")
	fs.IntVar(&o.maxSeqs, "max-num-seqs", 0, "the measured replica's --max-num-seqs (0: vLLM's default for the GPU)")
	fs.IntVar(&o.maxTokens, "max-num-batched-tokens", 0, "the measured replica's --max-num-batched-tokens (0: vLLM's default for the GPU)")
	fs.StringVar(&o.vllm, "vllm", "", "vLLM release the measured replica ran (empty: the newest modelled)")
	fs.StringVar(&o.name, "name", "", "name of the fitted GPU in the written catalog (default GPU-calibrated)")
	fs.IntVar(&o.evals, "evals", 150, "most simulations the search runs")
	fs.BoolVar(&o.fitDelay, "fit-network-delay", true, "also fit the one-way client-to-replica delay (the HTTP hop in client-measured latencies), written as router.network_delay")
	fs.StringVar(&o.out, "out", filepath.Join("out", "calibrate"), "directory for catalog.json, fleet.yaml and report.md")
	return fs, o
}

// runCalibrate fits the catalog GPU's efficiencies to measured runs:
//
//	simulate -calibrate FILE|DIR[,...] -base GPU[/MODEL] [-holdout FILE|DIR[,...]] [-out DIR]
//
// It writes catalog.json (a catalog file with the fitted GPU), fleet.yaml (the sweep-file keys
// that use it, with the fitted router.network_delay) and report.md (simulated
// against measured, per metric, before and after, on the fit and held-out requests) to -out
// and prints the report. Exit status 0 on success, 1 when the fit fails, 2 for bad arguments
// or unreadable inputs.
func runCalibrate(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "calibrate" {
		args = args[1:]
	}
	fs, o := calibrateFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "simulate calibrate:", err)
		return code
	}
	inputs := append(splitList(o.inputs), fs.Args()...)
	cfg, info, err := o.config(inputs)
	if err != nil {
		return fail(2, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := calibrate.Fit(ctx, cfg)
	if err != nil {
		return fail(1, err)
	}
	rep, err := writeCalibration(o.out, info, res)
	if err != nil {
		return fail(1, err)
	}
	_, _ = stdout.Write(rep)
	return 0
}

// config reads the inputs and resolves the replica.
func (o *calOptions) config(inputs []string) (calibrate.FitConfig, calibrate.ReportInfo, error) {
	var c calibrate.FitConfig
	if len(inputs) == 0 || o.base == "" {
		return c, calibrate.ReportInfo{}, errors.New("need -calibrate FILE|DIR and -base GPU[/MODEL]")
	}
	fit, err := readMeasurements(inputs)
	if err != nil {
		return c, calibrate.ReportInfo{}, err
	}
	hold, err := readMeasurements(splitList(o.holdout))
	if err != nil {
		return c, calibrate.ReportInfo{}, err
	}
	gpu, model, _ := strings.Cut(o.base, "/")
	if model == "" {
		model = fit[0].Model
	}
	rep, err := o.replica(gpu, model)
	if err != nil {
		return c, calibrate.ReportInfo{}, err
	}
	c = calibrate.FitConfig{Base: rep, Fit: fit, Holdout: hold, HoldoutEvery: o.every, MaxEvaluations: o.evals, FixNetworkDelay: !o.fitDelay}
	name := o.name
	if name == "" {
		name = rep.Deployment.GPU.Name + "-calibrated"
	}
	info := calibrate.ReportInfo{Inputs: inputs, Holdout: splitList(o.holdout), GPU: rep.Deployment.GPU.Name,
		Model: rep.Model, Catalog: "catalog.json", CatalogGPU: name, HoldoutEvery: o.every, TP: o.tp}
	return c, info, nil
}

// replica resolves the catalog GPU and model into the deployment the fit starts from.
func (o *calOptions) replica(gpu, model string) (calibrate.Replica, error) {
	g, err := gpumodel.LookupGPU(gpu)
	if err != nil {
		return calibrate.Replica{}, fmt.Errorf("-base: %w", err)
	}
	if model == "" {
		return calibrate.Replica{}, errors.New("-base: the inputs name no model: give -base GPU/MODEL")
	}
	m, err := gpumodel.LookupModel(model)
	if err != nil {
		return calibrate.Replica{}, fmt.Errorf("-base: %w (give -base GPU/MODEL with a catalog model)", err)
	}
	d, err := gpumodel.EngineArgs{MaxNumSeqs: o.maxSeqs, MaxNumBatchedTokens: o.maxTokens}.Deployment(g, m, max(o.tp, 1))
	if err == nil {
		err = d.Validate()
	}
	if err != nil {
		return calibrate.Replica{}, err
	}
	rel, err := engine.ParseRelease(o.vllm)
	if err != nil {
		return calibrate.Replica{}, fmt.Errorf("-vllm: %w", err)
	}
	return calibrate.Replica{Deployment: d, Model: m.Name, Release: rel}, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readMeasurements reads each path: a directory as cmd/loadgen's results (one measurement
// per run), a file as vllm bench serve JSON.
func readMeasurements(paths []string) ([]calibrate.Measurement, error) {
	var out []calibrate.Measurement
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			ms, err := readLoadgenDir(p)
			if err != nil {
				return nil, err
			}
			out = append(out, ms...)
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		m, err := calibrate.ParseBenchServe(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// readLoadgenDir reads a results directory's summary.json (for its run names), requests.csv
// and, when present, vllm-metrics.json (the servers' histograms, attached to their runs).
func readLoadgenDir(dir string) ([]calibrate.Measurement, error) {
	runs, err := results.ReadSummary(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.Name
	}
	path := filepath.Join(dir, "requests.csv")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := calibrate.ParseRequestsCSV(f, path, names)
	if err != nil {
		return nil, err
	}
	return ms, attachServerStats(filepath.Join(dir, results.VLLMMetricsFile), names, ms)
}

// attachServerStats reads the metrics file at path, if there is one, and gives each
// measurement its run's server-side latencies.
func attachServerStats(path string, runs []string, ms []calibrate.Measurement) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	byRun, err := calibrate.ParseMetricsFile(f, path, runs)
	if err != nil {
		return err
	}
	for i := range ms {
		if s, ok := byRun[ms[i].Run]; ok {
			ms[i].Server = &s
		}
	}
	return nil
}

// writeCalibration writes catalog.json, fleet.yaml and report.md to dir and returns the
// report.
func writeCalibration(dir string, info calibrate.ReportInfo, r calibrate.FitResult) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var cat, rep bytes.Buffer
	if err := calibrate.WriteCatalog(&cat, info.CatalogGPU, info.GPU, r.After.Efficiency); err != nil {
		return nil, err
	}
	fleet := fmt.Sprintf("# Sweep-file keys for the calibrated replica (simulate -calibrate); merge them into a sweep file.\n"+
		"catalog: %s\nfleet: {gpu: %s, model: %s, tp: %d}\nrouter: {network_delay: %s}\n",
		info.Catalog, info.CatalogGPU, info.Model, max(info.TP, 1), r.After.NetworkDelay.Round(time.Microsecond))
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(fleet), 0o644); err != nil {
		return nil, err
	}
	if err := calibrate.WriteReport(&rep, info, r); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, info.Catalog), cat.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return rep.Bytes(), os.WriteFile(filepath.Join(dir, "report.md"), rep.Bytes(), 0o644)
}
