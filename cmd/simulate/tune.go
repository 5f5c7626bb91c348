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
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvroute/internal/tune"
	"kvroute/router"
	"kvroute/sweep"
)

// tuneOptions are the flags of simulate -tune.
type tuneOptions struct {
	policies string // -tune: names, "all", or one spec
	point    string // -point: which point of the sweep
	params   string // -tune-params: the parameters to search
	search   tune.Options
}

// tuneFlags defines -tune and the flags that shape its search.
func tuneFlags(fs *flag.FlagSet, o *options) {
	t := &o.tune
	fs.StringVar(&t.policies, "tune", "", "search the numeric parameters of `policies` (comma-separated names, all, or one spec "+
		"such as '{name: kv-router, router_temperature: 0.1}') on one point of the sweep for the lowest p99 TTFT, or the highest "+
		"goodput under the file's slo; writes tune.json, tune.md and a map per policy, and ranking.md for several, to -out "+
		"(default out/tune/<name>) (docs/tune.md)")
	fs.StringVar(&t.point, "point", "", "with -tune: the sweep `point` to tune on, by its label (rate=30, as run names end) or "+
		"0-based index; may be left out when the file has one point")
	fs.StringVar(&t.params, "tune-params", "", "with -tune: comma-separated parameters to search (default every bounded one "+
		"that is not optional)")
	fs.Uint64Var(&t.search.Seed, "tune-seed", 1, "with -tune: the seed of the search's Latin hypercube")
	fs.IntVar(&t.search.SearchReps, "tune-reps", 10, "with -tune: replications every candidate runs on, the same for all")
	fs.IntVar(&t.search.FinalReps, "tune-final-reps", 20, "with -tune: fresh replications on which tuned and default "+
		"parameters are compared")
	fs.IntVar(&t.search.Initial, "tune-initial", 0, "with -tune: Latin hypercube candidates (0: max(8, 4 × parameters))")
	fs.IntVar(&t.search.Rounds, "tune-rounds", 12, "with -tune: the most compass-search rounds after the hypercube")
}

// runTune is simulate -tune.
func runTune(points []sweep.Point, o options, stdout io.Writer, log *slog.Logger) int {
	p, err := selectPoint(points, o.tune.point)
	if err != nil {
		log.Error("tune", "err", err)
		return 2
	}
	specs, err := tuneSpecs(o.tune.policies)
	if err != nil {
		log.Error("tune", "err", err)
		return 2
	}
	if o.out == "" {
		o.out = filepath.Join("out", "tune", p.Name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.plan {
		return planTune(ctx, p, specs, o, stdout, log)
	}
	start := time.Now()
	var done []tune.Result
	pending := 0
	for _, spec := range specs {
		r, err := tuneOne(ctx, p, spec, o, log)
		switch {
		case errors.Is(err, errRoundShared):
			pending++
			continue
		case err != nil:
			log.Error("tune", "policy", spec.Name, "err", err)
			return exitCode(err)
		}
		done = append(done, r)
		fmt.Fprintln(stdout, r.Summary())
	}
	if pending > 0 {
		log.Info("tune: this shard ran its part of the next round; run the shards again once all have finished",
			"policies_pending", pending, "dir", o.out)
		return 0
	}
	if err := writeRanking(o, done, stdout); err != nil {
		log.Error("tune: the ranking", "err", err)
		return 1
	}
	log.Info("tune finished", "policies", len(done), "dir", o.out, "wall", time.Since(start).Round(time.Millisecond))
	return 0
}

func exitCode(err error) int {
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

// selectPoint picks the point called label (its Label, or its 0-based index); the only
// point when label is empty.
func selectPoint(points []sweep.Point, label string) (sweep.Point, error) {
	var labels []string
	for i, p := range points {
		if p.Label() == label || strconv.Itoa(i) == label || (label == "" && len(points) == 1) {
			return p, nil
		}
		labels = append(labels, p.Label())
	}
	if label == "" {
		return sweep.Point{}, fmt.Errorf("the sweep has %d points: pick one with -point (%s)", len(points), strings.Join(labels, " | "))
	}
	return sweep.Point{}, fmt.Errorf("-point %q: no such point (%s)", label, strings.Join(labels, " | "))
}

// tuneSpecs reads -tune: "all", names separated by commas, or one spec with parameters.
func tuneSpecs(v string) ([]sweep.PolicySpec, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		spec, err := sweep.ParsePolicySpec([]byte(v))
		return []sweep.PolicySpec{spec}, err
	}
	names := strings.Split(v, ",")
	if v == "all" {
		names = router.Builtin().Names()
	}
	var specs []sweep.PolicySpec
	for _, n := range names {
		n = strings.TrimSpace(n)
		if _, err := router.Builtin().Defaults(n); err != nil {
			return nil, err
		}
		specs = append(specs, sweep.PolicySpec{Name: n})
	}
	return specs, nil
}

// tuneSpace is the space -tune searches for spec, and -plan sizes: the parameters params
// names (-tune-params: comma-separated, spaces trimmed), or every bounded one that is not
// optional when it names none.
func tuneSpace(spec sweep.PolicySpec, params string) (tune.Space, error) {
	return tune.NewSpace(router.Builtin(), spec, splitList(params))
}

// tuneOne searches one policy and compares it, with its trials cached in its directory.
func tuneOne(ctx context.Context, p sweep.Point, spec sweep.PolicySpec, o options, log *slog.Logger) (tune.Result, error) {
	space, err := tuneSpace(spec, o.tune.params)
	if err != nil {
		return tune.Result{}, err
	}
	dir := filepath.Join(o.out, spec.Name)
	obj := tune.ObjectiveOf(p)
	cache, err := openTrialCache(dir, o.shard, p, obj)
	if err != nil {
		return tune.Result{}, err
	}
	run := cache.runner(tune.SimRunner(p, obj, o.parallel))
	s, err := tune.Run(ctx, space, obj, o.tune.search, run)
	if err != nil {
		return tune.Result{}, err
	}
	c, err := tune.Compare(ctx, s, run)
	if err != nil {
		return tune.Result{}, err
	}
	r := tune.NewResult(p.Name+" "+p.Label(), s, c)
	if o.shard.Index == 0 {
		err = writeTune(dir, r, s)
	}
	if !o.quiet {
		log.Info("tuned", "policy", spec.Name, "verdict", c.Verdict, "runs", s.Runs, "simulated", cache.ran)
	}
	return r, err
}
