package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"kvroute/internal/loadgen"
	"kvroute/internal/openai"
	"kvroute/results"
	"kvroute/results/report"
	"kvroute/sweep"
	"kvroute/workloads"
)

// job is one run: a point under the run label.
type job struct {
	index        int
	name, policy string
	point        Point
}

// plan names the runs as cmd/simulate does, with the label in the policy's place.
func plan(points []Point, label string) []job {
	policy := label
	if label == "" {
		label, policy = "live", "live"
		if ps := points[0].Policies; len(ps) == 1 {
			label, policy = ps[0].Label(), ps[0].Name
		}
	}
	jobs := make([]job, len(points))
	for i, p := range points {
		name := label
		if l := p.Label(); l != "base" {
			name += "/" + l
		}
		jobs[i] = job{index: i, name: name, policy: policy, point: p}
	}
	return jobs
}

// runPoints runs the points one after another and returns the runs that produced records; a
// run cut short by ctx is kept, marked "interrupted" in its scenario.
func runPoints(ctx context.Context, o options, points []Point, stderr io.Writer, log *slog.Logger) (_ []results.Run, err error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(o.out, results.RequestsFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<16)
	rows, err := results.NewRequestsCSV(w)
	if err != nil {
		return nil, err
	}
	prog := newProgress(o, stderr, log)
	defer prog.wait()
	var runs []results.Run
	var hists []results.RunHistograms
	defer func() {
		if len(o.metricsURLs()) > 0 {
			err = errors.Join(err, writeMetricsFile(o.out, hists))
		}
	}()
	for _, j := range plan(points, o.label) {
		run, hist, err := execute(ctx, o, j, rows, prog)
		if run.Metrics.Requests > 0 {
			runs, hists = append(runs, run), append(hists, hist)
		}
		if ferr := rows.Flush(); err == nil {
			err = ferr
		}
		if err != nil {
			return runs, errors.Join(err, w.Flush())
		}
	}
	if err := w.Flush(); err != nil {
		return runs, err
	}
	return runs, f.Close()
}

// execute runs one job against the target and returns it with the servers' histogram deltas
// over its recorded part.
func execute(ctx context.Context, o options, j job, rows *results.RequestsCSV, prog *progress) (results.Run, results.RunHistograms, error) {
	p := j.point
	hist := results.RunHistograms{Run: j.name}
	model, err := chooseModel(ctx, o, p)
	if err != nil {
		return results.Run{}, hist, err
	}
	stream, err := buildStream(p)
	if err != nil {
		return results.Run{}, hist, err
	}
	defer stream.Close()
	scrape := &http.Client{Timeout: 10 * time.Second}
	before := loadgen.Scrape(ctx, scrape, o.metricsURLs())
	col := results.NewCollector(results.CollectorOpts{Name: j.name, Policy: j.policy, Group: p.group(),
		Scenario: scenario(o, j, model), RequestRate: p.Arrival.Rate, SLO: p.SLO()})
	var bench *loadgen.Bench
	if o.benchJSON != "" {
		bench = loadgen.NewBench(benchInfo(o, j, model, time.Now()))
	}
	lo := loadgen.Options{Target: o.target, Model: model, MaxConcurrency: o.maxConcurrency, Warmup: o.warmup, RequestTimeout: o.timeout}
	tick := prog.start(j)
	var werr error
	wctx, stopWarm := context.WithCancel(ctx)
	warm := scrapeAfter(wctx, o, scrape)
	st, runErr := loadgen.Run(ctx, lo, stream, loadgen.Sink{Result: func(r *loadgen.Result) {
		tick()
		if r.Warmup {
			return
		}
		col.Add(&r.Record)
		if r.Record.Status == results.StatusCompleted {
			for _, d := range r.ITL {
				col.AddITL(d, 1)
			}
		}
		if werr == nil {
			werr = rows.Write(j.name, &r.Record)
		}
		if bench != nil {
			bench.Add(r)
		}
	}})
	after := loadgen.Scrape(context.WithoutCancel(ctx), scrape, o.metricsURLs())
	stopWarm()
	if c, ok := <-warm; ok {
		before = c // the counters as the warm-up ended: the hit rate of the recorded part
	}
	run := col.Run()
	hist.Servers = loadgen.HistogramDeltas(before, after)
	addLiveScenario(run.Scenario, st, before, after, runErr != nil)
	prog.done(j, run)
	if bench != nil && run.Metrics.Requests > 0 {
		werr = errors.Join(werr, writeBench(benchPath(o.benchJSON, j), bench, st.Elapsed))
	}
	return run, hist, errors.Join(runErr, werr)
}

// writeMetricsFile writes the runs' histogram deltas to dir's vllm-metrics.json.
func writeMetricsFile(dir string, runs []results.RunHistograms) error {
	var b bytes.Buffer
	if err := loadgen.WriteMetricsFile(&b, runs); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, results.VLLMMetricsFile), b.Bytes(), 0o644)
}

// scrapeAfter reads the counters once the warm-up is over, in the background; the channel
// yields them, or is closed without a value when there is no warm-up or ctx ends first (a
// scrape already started is finished).
func scrapeAfter(ctx context.Context, o options, client *http.Client) <-chan []loadgen.Counters {
	out := make(chan []loadgen.Counters, 1)
	urls := o.metricsURLs()
	if o.warmup <= 0 || len(urls) == 0 {
		close(out)
		return out
	}
	t := time.NewTimer(o.warmup)
	go func() {
		defer close(out)
		defer t.Stop()
		select {
		case <-t.C:
			out <- loadgen.Scrape(context.WithoutCancel(ctx), client, urls)
		case <-ctx.Done():
		}
	}()
	return out
}

// buildStream builds the point's request stream with the simulator's workload seed.
func buildStream(p Point) (*workloads.Stream, error) {
	opts, err := p.StreamOptions()
	if err != nil {
		return nil, err
	}
	return workloads.Build(p.Workload(), p.WorkloadSeed(), opts...)
}

// chooseModel returns -model, else fleet.model, else the target's first served model.
func chooseModel(ctx context.Context, o options, p Point) (string, error) {
	if o.model != "" {
		return o.model, nil
	}
	if m := p.model(); m != "" {
		return m, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(o.target, "/")+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("no -model and no fleet.model, and listing the target's models failed: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	models, err := openai.ParseModels(b)
	if err != nil || len(models) == 0 {
		return "", fmt.Errorf("no -model and no fleet.model, and %s/v1/models lists none (%v)", o.target, err)
	}
	return models[0].ID, nil
}

// scenario is what summary.json records about the run's setting before it starts.
func scenario(o options, j job, model string) map[string]any {
	p := j.point
	r := p.Workload().Resolve()
	policies := make([]string, len(p.Policies))
	for i, ps := range p.Policies {
		policies[i] = ps.Label()
	}
	s := map[string]any{
		"name": p.Name, "seed": p.Seed, "mode": "live", "target": o.target, "model": model, "policies": policies,
		"fleet":    p.Fleet,
		"workload": string(r.Workload.Kind),
		"arrival":  map[string]any{"process": string(r.Arrival.Process), "rate": p.Arrival.Rate},
		"requests": p.Requests, "duration": p.Duration.String(),
		"max_concurrency": o.maxConcurrency, "warmup": o.warmup.String(), "request_timeout": o.timeout.String(),
	}
	for _, a := range p.Axes {
		s["axis."+a.Path] = a.Value
	}
	return s
}

// addLiveScenario records what the run measured besides the requests: the servers' hit
// rate over the run, how late the dispatcher was, and how many requests were warm-up.
func addLiveScenario(s map[string]any, st loadgen.Stats, before, after []loadgen.Counters, interrupted bool) {
	if rate, q, h, ok := loadgen.ServerHitRate(before, after); ok {
		s["server_hit_rate"], s["server_prefix_queries"], s["server_prefix_hits"] = rate, q, h
	}
	var pages, errs []string
	for _, c := range after {
		switch {
		case c.VLLM:
			pages = append(pages, c.URL)
		case c.Err != nil:
			errs = append(errs, c.Err.Error())
		}
	}
	s["metrics_vllm_pages"] = pages
	if len(errs) > 0 {
		s["metrics_errors"] = errs
	}
	s["sent"], s["warmup_requests"] = st.Sent, st.Warmup
	s["dispatch_lag_p99_ms"] = float64(st.Lag.Quantile(0.99)) / 1e6
	s["dispatch_lag_max_ms"] = float64(st.Lag.Quantile(1)) / 1e6
	s["wall_s"] = st.Elapsed.Seconds()
	if interrupted {
		s["interrupted"] = true
	}
}

// writeResults writes the results directory of the runs (requests.csv is already there).
func writeResults(o options, runs []results.Run, points []Point) error {
	type resolved struct {
		Point        string           `yaml:"point"`
		WorkloadSeed uint64           `yaml:"workload_seed"`
		File         sweep.File       `yaml:",inline"`
		Resolved     workloads.Config `yaml:"resolved_workload"`
	}
	doc := map[string]any{"loadgen": map[string]any{
		"target": o.target, "label": o.label, "model": o.model, "metrics": o.metricsURLs(),
		"max_concurrency": o.maxConcurrency, "warmup": o.warmup.String(), "timeout": o.timeout.String(),
	}}
	var pts []resolved
	for _, p := range points {
		pts = append(pts, resolved{Point: p.Label(), WorkloadSeed: p.WorkloadSeed(), File: p.File, Resolved: p.Workload().Resolve()})
	}
	doc["points"] = pts
	cfg, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	return report.WriteDir(o.out, runs, cfg)
}
