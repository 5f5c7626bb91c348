package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"kvroute/gpumodel"
	"kvroute/results"
	"kvroute/results/report"
	"kvroute/router"
	"kvroute/sweep"
	"kvroute/workloads"
)

// runSweep runs the jobs o.parallel at a time. The returned slice has one entry per job, in job
// order; a job that did not finish (cancelled or failed) leaves its entry without a name.
// Each job's requests go to a part file in o.out, joined into requests.csv by writeResults.
func runSweep(ctx context.Context, jobs []sweep.Job, o options, stderr io.Writer, log *slog.Logger) ([]results.Run, error) {
	return sweepWith(ctx, jobs, o, stderr, log, func() {})
}

// sweepWith is runSweep calling finished after each run completes (tests use it).
func sweepWith(ctx context.Context, jobs []sweep.Job, o options, stderr io.Writer, log *slog.Logger, finished func()) ([]results.Run, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	bars := newProgress(o, stderr, len(jobs))
	runs, err := sweep.RunAll(ctx, jobs, o.parallel, func(ctx context.Context, j sweep.Job) (results.Run, error) {
		return executeToPart(ctx, j, o.out, bars.start(j))
	}, func(j sweep.Job, run results.Run) {
		bars.done(j, run, log)
		finished()
	})
	bars.wait()
	return runs, err
}

// executeToPart runs j with its request rows in a part file.
func executeToPart(ctx context.Context, j sweep.Job, dir string, tick func()) (results.Run, error) {
	f, err := os.Create(partPath(dir, j.Index))
	if err != nil {
		return results.Run{}, err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	run, err := j.Execute(ctx, w, tick)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return run, err
}

func partPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf(".requests-%04d.csv", i))
}

// writeResults writes the report for the finished runs and joins their request parts.
func writeResults(dir string, runs []results.Run, points []sweep.Point) error {
	cfg, err := sweep.ResolvedConfig(points)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := report.WriteDir(dir, completed(runs), cfg); err != nil {
		return err
	}
	return joinParts(dir, runs)
}

// joinParts concatenates the finished runs' part files, header once, into requests.csv.
func joinParts(dir string, runs []results.Run) error {
	out, err := os.Create(filepath.Join(dir, results.RequestsFile))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<16)
	header := true
	for i, r := range runs {
		part := partPath(dir, i)
		if r.Name != "" {
			if err := appendPart(w, part, header); err != nil {
				out.Close()
				return err
			}
			header = false
		}
		os.Remove(part)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func appendPart(w *bufio.Writer, path string, header bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !header {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	_, err = w.Write(data)
	return err
}

func completed(runs []results.Run) []results.Run {
	var out []results.Run
	for _, r := range runs {
		if r.Name != "" {
			out = append(out, r)
		}
	}
	return out
}

// progress shows mpb bars on a terminal and log lines otherwise.
type progress struct {
	p     *mpb.Progress
	total *mpb.Bar
	log   bool
}

func newProgress(o options, stderr io.Writer, n int) *progress {
	f, ok := stderr.(*os.File)
	if o.quiet {
		return &progress{}
	}
	if !ok || !isTerminal(f) {
		return &progress{log: true}
	}
	p := mpb.New(mpb.WithOutput(stderr), mpb.WithWidth(40))
	total := p.AddBar(int64(n), mpb.PrependDecorators(decor.Name("runs "), decor.CountersNoUnit("%d/%d")),
		mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
	return &progress{p: p, total: total}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// start returns the tick function for j's finished requests.
func (g *progress) start(j sweep.Job) func() {
	if g.p == nil {
		return func() {}
	}
	bar := g.p.AddBar(int64(max(j.Point.Requests, 0)), mpb.BarRemoveOnComplete(),
		mpb.PrependDecorators(decor.Name(j.Name+" ", decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d")))
	return func() { bar.Increment() }
}

func (g *progress) done(j sweep.Job, run results.Run, log *slog.Logger) {
	switch {
	case g.total != nil:
		g.total.Increment()
	case g.log:
		m := run.Metrics
		log.Info("run finished", "run", j.Name, "requests", m.Requests, "ttft_p99_ms", m.TTFT.P99, "hit_rate", fmt.Sprintf("%.3f", m.HitRate))
	}
}

func (g *progress) wait() {
	if g.p != nil {
		g.total.SetTotal(-1, true)
		g.p.Shutdown()
	}
}

// printList prints what a sweep file can name.
func printList(w io.Writer) {
	fmt.Fprintln(w, "policies (name, source, rule):")
	for _, info := range router.Builtin().Info() {
		fmt.Fprintln(w, "  "+info.String())
	}
	cat := gpumodel.DefaultCatalog()
	fmt.Fprintln(w, "gpus (name, memory, dense BF16 peak, memory bandwidth):")
	for _, g := range cat.GPUs() {
		fmt.Fprintf(w, "  %s\t%.0f GiB\t%.0f TFLOP/s\t%.2f TB/s\n", g.Name, float64(g.MemoryBytes)/(1<<30), g.PeakFLOPS/1e12, g.MemoryBandwidth/1e12)
	}
	fmt.Fprintln(w, "models (name, parameters, layers, KV per token):")
	for _, m := range cat.Models() {
		fmt.Fprintf(w, "  %s\t%.1fB\t%d layers\t%d KiB/token\n", m.Name, float64(m.Params)/1e9, m.Layers, m.KVBytesPerToken()>>10)
	}
	fmt.Fprintln(w, "workload kinds:")
	for _, k := range workloads.Kinds() {
		fmt.Fprintf(w, "  %s\t%s\n", k.Kind, k.Doc)
	}
	fmt.Fprintln(w, "arrival processes:\n  poisson\n  gamma\n  constant\n  immediate\n  trace\n  (or arrival.stages: a ladder of poisson stages)")
}
