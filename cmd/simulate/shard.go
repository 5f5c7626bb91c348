package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"kvroute/results"
	"kvroute/results/report"
	"kvroute/sweep"
)

// ShardFile is the manifest a shard writes beside its results: which part of which
// configuration its runs are, and where each run's request rows lie in its requests.csv.
// -merge reads it to join the shards in plan order.
const ShardFile = "shard.json"

// shardManifest is shard.json.
type shardManifest struct {
	// Shard is the part, "i/n" as -shard took it.
	Shard string `json:"shard"`
	// ConfigSHA256 is the SHA-256 of the shard's config.yaml, the resolved sweep with its
	// seeds: shards of one sweep have the same.
	ConfigSHA256 string `json:"config_sha256"`
	// PlanRuns is the number of runs in the whole sweep's plan.
	PlanRuns int `json:"plan_runs"`
	// HeaderBytes is the length of requests.csv's header line (0 when no run finished).
	HeaderBytes int64 `json:"header_bytes"`
	// Runs are the shard's finished runs, in plan order.
	Runs []shardRun `json:"runs"`
}

// shardRun is one finished run of a shard: its place in the plan and its request rows.
type shardRun struct {
	Index int    `json:"index"` // its place in the plan (sweep.Job.Index)
	Name  string `json:"name"`
	// RowsOffset and RowsBytes locate its rows, header excluded, in requests.csv.
	RowsOffset int64 `json:"rows_offset"`
	RowsBytes  int64 `json:"rows_bytes"`
}

// configHash is the hex SHA-256 of a resolved configuration.
func configHash(cfg []byte) string {
	sum := sha256.Sum256(cfg)
	return hex.EncodeToString(sum[:])
}

// defaultOut is -out's default: out/<sweep name>, or a folder per shard below it.
func defaultOut(name string, sh sweep.Shard) string {
	if sh.Whole() {
		return filepath.Join("out", name)
	}
	return filepath.Join("out", name, fmt.Sprintf("shard-%d-of-%d", sh.Index, sh.Count))
}

// writeShard writes a shard's output to dir: config.yaml, summary.json and series.json
// for its finished runs, their request rows joined into requests.csv, and shard.json.
// runs[k] is the run of jobs[k]; the report and plots are left to -merge, which sees
// every run.
func writeShard(dir string, sh sweep.Shard, planRuns int, jobs []sweep.Job, runs []results.Run, points []sweep.Point) error {
	cfg, err := sweep.ResolvedConfig(points)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	done := completed(runs)
	var summary, series bytes.Buffer
	if err := report.WriteSummaryJSON(&summary, done); err != nil {
		return err
	}
	if err := results.WriteSeriesJSON(&series, done); err != nil {
		return err
	}
	m := shardManifest{Shard: sh.String(), ConfigSHA256: configHash(cfg), PlanRuns: planRuns, Runs: []shardRun{}}
	if err := joinShardParts(dir, jobs, runs, &m); err != nil {
		return err
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{results.ConfigFile, cfg}, {results.SummaryJSONFile, summary.Bytes()}, {results.SeriesFile, series.Bytes()},
		{ShardFile, append(manifest, '\n')}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// joinShardParts joins the finished runs' part files into requests.csv, header once, and
// records where each run's rows lie in m.
func joinShardParts(dir string, jobs []sweep.Job, runs []results.Run, m *shardManifest) error {
	out, err := os.Create(filepath.Join(dir, results.RequestsFile))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<16)
	var at int64
	for k, j := range jobs {
		part := partPath(dir, j.Index)
		if runs[k].Name == "" {
			os.Remove(part)
			continue
		}
		data, err := os.ReadFile(part)
		if err != nil {
			out.Close()
			return err
		}
		head := int64(bytes.IndexByte(data, '\n') + 1)
		if at == 0 {
			m.HeaderBytes = head
			at = head
			w.Write(data[:head])
		}
		w.Write(data[head:])
		m.Runs = append(m.Runs, shardRun{Index: j.Index, Name: runs[k].Name, RowsOffset: at, RowsBytes: int64(len(data)) - head})
		at += int64(len(data)) - head
		os.Remove(part)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// shardFlags defines -shard, -plan, -plan-wall and -merge.
func shardFlags(fs *flag.FlagSet, o *options) {
	fs.Func("shard", "`i/n`: run only the plan's runs whose index mod n is i, writing them and shard.json to -out "+
		"(default out/<name>/shard-i-of-n) for -merge", func(s string) error {
		sh, err := sweep.ParseShard(s)
		o.shard = sh
		return err
	})
	fs.BoolVar(&o.plan, "plan", false, "print the number of runs, their CPU time estimated from a short probe run on this machine, "+
		"and the shards that finish within -plan-wall; runs nothing else")
	fs.DurationVar(&o.planWall, "plan-wall", time.Hour, "the wall time -plan sizes the shard count for")
	fs.BoolVar(&o.merge, "merge", false, "join the shard directories given as arguments, or those under a directory given (simulate -merge -out DIR SHARD...), "+
		"into the results directory the unsharded sweep writes")
}

// writeOutput writes the results of runs (runs[k] of jobs[k]): a results directory, or a
// shard's output with -shard.
func writeOutput(o options, planRuns int, jobs []sweep.Job, runs []results.Run, points []sweep.Point) error {
	if o.shard.Whole() {
		return writeResults(o.out, runs, points)
	}
	return writeShard(o.out, o.shard, planRuns, jobs, runs, points)
}
