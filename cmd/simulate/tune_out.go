package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"kvroute/internal/tune"
	"kvroute/results/report"
	"kvroute/sweep"
)

// Files of a tune's output: per policy in <out>/<policy>, the ranking in <out>.
const (
	tuneJSONFile    = "tune.json"
	tuneReportFile  = "tune.md"
	tuneMapFile     = "objective-map.png"
	rankingJSONFile = "ranking.json"
	rankingFile     = "ranking.md"
)

// writeTune writes a policy's result: tune.json, tune.md and the objective's map over the
// two most influential parameters (none for a policy with no parameters).
func writeTune(dir string, r tune.Result, s *tune.Search) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var js, md bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		return err
	}
	plot := ""
	if len(r.PlotParams) > 0 {
		png, err := report.ObjectiveMapPNG(objectiveMap(r, s))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, tuneMapFile), png, 0o644); err != nil {
			return err
		}
		plot = tuneMapFile
	}
	if err := r.WriteMarkdown(&md, plot); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, tuneJSONFile), js.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, tuneReportFile), md.Bytes(), 0o644)
}

// objectiveMap is the search's candidates over the result's plot parameters; with one
// parameter the y axis is the objective itself.
func objectiveMap(r tune.Result, s *tune.Search) report.ObjectiveMap {
	index := map[string]int{}
	for i, p := range s.Space.Params {
		index[p.Key] = i
	}
	xi, yi := index[r.PlotParams[0]], -1
	m := report.ObjectiveMap{Title: fmt.Sprintf("%s: %s of each candidate (search seeds)", r.Policy, r.Objective.Name),
		X: r.PlotParams[0], Y: r.Objective.Name, Z: r.Objective.Name, XLog: s.Space.Params[xi].Log,
		LowerIsBetter: !r.Objective.Maximize, ZLog: !r.Objective.Maximize}
	if len(r.PlotParams) > 1 {
		yi = index[r.PlotParams[1]]
		m.Y, m.YLog = r.PlotParams[1], s.Space.Params[yi].Log
	}
	at := func(c tune.Candidate) (float64, float64) {
		if yi < 0 {
			return c.Values[xi], c.SearchScore
		}
		return c.Values[xi], c.Values[yi]
	}
	for _, c := range s.Candidates {
		x, y := at(c)
		m.Points = append(m.Points, report.MapPoint{X: x, Y: y, Z: c.SearchScore})
	}
	dx, dy := at(s.Candidates[0])
	tx, ty := at(s.Tuned())
	m.Marks = []report.MapMark{{Name: "defaults", X: dx, Y: dy}, {Name: "tuned", X: tx, Y: ty}}
	return m
}

// writeRanking writes ranking.md and ranking.json when several policies were tuned.
func writeRanking(o options, done []tune.Result, stdout io.Writer) error {
	if len(done) < 2 || o.shard.Index != 0 {
		return nil
	}
	k, err := tune.Rank(done)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, k.Survives())
	var md bytes.Buffer
	if err := k.WriteMarkdown(&md); err != nil {
		return err
	}
	js, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, rankingJSONFile), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, rankingFile), md.Bytes(), 0o644)
}

// planTune is -plan with -tune: the most runs each policy's search and comparison take,
// their CPU time from a probe, and the shards that finish one round within -plan-wall.
func planTune(ctx context.Context, p sweep.Point, specs []sweep.PolicySpec, o options, stdout io.Writer, log *slog.Logger) int {
	var jobs []sweep.Job
	for _, spec := range specs {
		space, err := tuneSpace(spec, o.tune.params)
		if err != nil {
			log.Error("plan", "err", err)
			return 2
		}
		n := o.tune.search.MaxRuns(space.Dim())
		fmt.Fprintf(stdout, "%s: %d parameters, at most %d runs\n", spec.Name, space.Dim(), n)
		for i := range n {
			jobs = append(jobs, tune.Job(p, tune.Trial{Spec: spec, Rep: i % max(o.tune.search.SearchReps, 1)}, len(jobs)))
		}
	}
	est, err := estimatePlan(ctx, jobs, o.parallel, o.planWall)
	if err != nil {
		log.Error("plan: the probe run failed", "err", err)
		return 1
	}
	est.print(stdout, o.parallel, o.planWall)
	fmt.Fprintln(stdout, "note: a search runs in rounds, each waiting for the one before; -shard splits every round, so the wall time is the rounds' sum.")
	return 0
}
