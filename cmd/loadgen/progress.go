package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"kvroute/results"
)

// progress shows an mpb bar per run on a terminal and log lines otherwise.
type progress struct {
	p     *mpb.Progress
	cur   *mpb.Bar // the bar of the run in progress (runs go one at a time)
	log   *slog.Logger
	quiet bool
}

func newProgress(o options, stderr io.Writer, log *slog.Logger) *progress {
	if o.quiet {
		return &progress{quiet: true}
	}
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		return &progress{p: mpb.New(mpb.WithOutput(stderr), mpb.WithWidth(40)), log: log}
	}
	return &progress{log: log}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// start announces j and returns the function to call after each of its requests ends.
func (g *progress) start(j job) func() {
	total := int64(max(j.point.Requests, 0))
	switch {
	case g.quiet:
		return func() {}
	case g.p != nil:
		bar := g.p.AddBar(total, mpb.PrependDecorators(decor.Name(j.name+" ", decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
		g.cur = bar
		return func() { bar.Increment() }
	}
	g.log.Info("run started", "run", j.name, "rate", j.point.Arrival.Rate, "requests", j.point.Requests, "duration", j.point.Duration)
	every := max(total/10, 100)
	var n atomic.Int64
	return func() {
		if k := n.Add(1); k%every == 0 {
			g.log.Info("progress", "run", j.name, "done", k, "of", total)
		}
	}
}

// done reports a finished run.
func (g *progress) done(j job, run results.Run) {
	if g.cur != nil {
		g.cur.SetTotal(-1, true) // complete it even when fewer requests than planned were sent
		g.cur = nil
	}
	if g.quiet || g.p != nil {
		return
	}
	m := run.Metrics
	g.log.Info("run finished", "run", j.name, "requests", m.Requests, "completed", m.Completed, "failed", m.Failed,
		"ttft_p99_ms", fmt.Sprintf("%.1f", m.TTFT.P99), "hit_rate", fmt.Sprintf("%.3f", m.HitRate),
		"server_hit_rate", run.Scenario["server_hit_rate"])
}

func (g *progress) wait() {
	if g.p != nil {
		g.p.Wait()
	}
}
