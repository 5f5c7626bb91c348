// Command loadgen replays a kvroute sweep file's workload against a live OpenAI-compatible
// endpoint (the kvroute router, a vLLM replica, or cmd/emulate) and writes the same results
// directory as cmd/simulate, so a simulated and a live run can be compared
// (`simulate -compare SIMDIR,LIVEDIR`).
//
//	go run ./cmd/loadgen -target http://127.0.0.1:8080 -config workload.yaml -out DIR
//	go run ./cmd/loadgen -target URL -config FILE -label prefix-score -warmup 10s \
//	    -metrics http://10.0.0.1:8000/metrics,http://10.0.0.2:8000/metrics -bench-json bench.json
//
// The file's workload, arrival, requests, duration and seed sections drive the load, with
// the same workload seed as the simulator; a list-valued arrival.rate (or other workload
// axis) runs its load levels one after another. Fleet, router and policies are recorded in
// each run's scenario only: the target decides the routing. Runs are named
// "<label>/<point>" as cmd/simulate names its runs "<policy>/<point>", where the label
// defaults to the file's policy when it lists exactly one, and "live" otherwise.
//
// Exit status: 0 when the runs finished, 1 when a run could not be done or no request
// completed, 2 for bad flags or a bad file, 130 when interrupted (the finished runs are
// written first).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"kvroute/results"
	"kvroute/results/report"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	target, config, out, label, model, metrics, benchJSON string
	maxConcurrency                                        int
	warmup, timeout                                       time.Duration
	quiet                                                 bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	op, fs := newFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return *op, err
	}
	o := *op
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	if o.target == "" || o.config == "" {
		errs = append(errs, errors.New("-target and -config are required"))
	}
	if o.maxConcurrency < 0 || o.warmup < 0 || o.timeout < 0 {
		errs = append(errs, errors.New("-max-concurrency, -warmup and -timeout must be >= 0"))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		fs.Usage()
		return o, err
	}
	return o, nil
}

// newFlags defines the flags on a new flag set that parses into the options it returns.
func newFlags(stderr io.Writer) (*options, *flag.FlagSet) {
	o := &options{}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.target, "target", "", "base URL of the OpenAI-compatible endpoint (required)")
	fs.StringVar(&o.config, "config", "", "sweep file (YAML), the format cmd/simulate reads (required)")
	fs.StringVar(&o.out, "out", "", "results directory (default out/<name>-live)")
	fs.StringVar(&o.label, "label", "", "names the runs and their policy column (default: the file's only policy, else \"live\")")
	fs.StringVar(&o.model, "model", "", "model to request (default: the file's fleet.model, else the target's first /v1/models entry)")
	fs.StringVar(&o.metrics, "metrics", "", "comma-separated Prometheus URLs scraped before and after each run for the servers' prefix-cache hit rate (default <target>/metrics; \"none\" to skip)")
	fs.StringVar(&o.benchJSON, "bench-json", "", "also write a JSON `file` as vllm bench serve --save-result does (one per run, suffixed by the point, when the config sweeps)")
	fs.IntVar(&o.maxConcurrency, "max-concurrency", 0, "cap on requests in flight (0: none)")
	fs.DurationVar(&o.warmup, "warmup", 0, "requests arriving before this offset in each run are sent but not recorded")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "per-request timeout (0: none)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress output")
	return o, fs
}

// metricsURLs returns the pages to scrape.
func (o options) metricsURLs() []string {
	switch o.metrics {
	case "none":
		return nil
	case "":
		return []string{strings.TrimSuffix(o.target, "/") + "/metrics"}
	}
	var out []string
	for _, u := range strings.Split(o.metrics, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	data, err := os.ReadFile(o.config)
	if err != nil {
		log.Error("reading the sweep file", "err", err)
		return 2
	}
	points, err := Parse(data, o.config)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: invalid sweep file:\n"+err.Error())
		return 2
	}
	if o.out == "" {
		o.out = filepath.Join("out", points[0].Name+"-live")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	runs, err := runPoints(ctx, o, points, stderr, log)
	if len(runs) > 0 {
		if werr := writeResults(o, runs, points); werr != nil {
			log.Error("writing results", "dir", o.out, "err", werr)
			return 1
		}
		if terr := report.WriteTable(stdout, runs); terr != nil {
			log.Error("printing the table", "err", terr)
		}
	}
	log.Info("load finished", "runs", len(runs), "of", len(points), "dir", o.out, "wall", time.Since(start).Round(time.Millisecond))
	switch {
	case errors.Is(err, context.Canceled):
		log.Error("interrupted", "err", err)
		return 130
	case err != nil:
		log.Error("load stopped", "err", err)
		return 1
	case noneCompleted(runs):
		log.Error("no request completed: is the target serving the model?", "target", o.target)
		return 1
	}
	return 0
}

func noneCompleted(runs []results.Run) bool {
	for _, r := range runs {
		if r.Metrics.Completed > 0 {
			return false
		}
	}
	return true
}
