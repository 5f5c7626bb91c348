package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kvroute/results"
	"kvroute/results/report"
	"kvroute/sweep"
)

// shardDir is one shard's output directory as -merge reads it.
type shardDir struct {
	path  string
	shard sweep.Shard
	m     shardManifest
	cfg   []byte // config.yaml
}

// mergeShards joins the shard directories into one results directory at out, the files
// the unsharded sweep writes, byte for byte. It refuses shards of different configurations
// or seeds, of different shard counts, duplicated or missing shards, and shards with runs
// missing. It returns the number of shards merged.
func mergeShards(out string, dirs []string) (int, error) {
	dirs, err := shardDirs(dirs)
	if err != nil {
		return 0, err
	}
	shards := make([]shardDir, len(dirs))
	for i, d := range dirs {
		if same, _ := sameDir(d, out); same {
			return 0, fmt.Errorf("merge: -out %s is one of the shard directories", out)
		}
		s, err := readShardDir(d)
		if err != nil {
			return 0, err
		}
		shards[i] = s
	}
	if err := checkShards(shards); err != nil {
		return 0, err
	}
	runs, err := mergedRuns(shards)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, fmt.Errorf("merge: %w", err)
	}
	if err := report.WriteDir(out, runs, shards[0].cfg); err != nil {
		return 0, fmt.Errorf("merge: %w", err)
	}
	return len(shards), mergeRequests(out, shards)
}

// shardDirs expands the arguments of -merge: a shard directory stands for itself, and a
// directory without shard.json for its subdirectories that hold one (where -shard writes
// by default, out/<name>/shard-i-of-n, or a Job's shared volume).
func shardDirs(args []string) ([]string, error) {
	var dirs []string
	for _, a := range args {
		if _, err := os.Stat(filepath.Join(a, ShardFile)); err == nil {
			dirs = append(dirs, a)
			continue
		}
		subs, err := filepath.Glob(filepath.Join(a, "*", ShardFile))
		if err != nil || len(subs) == 0 {
			return nil, fmt.Errorf("merge: %s: no %s in it or its subdirectories: not the output of a -shard run", a, ShardFile)
		}
		for _, s := range subs {
			dirs = append(dirs, filepath.Dir(s))
		}
	}
	if len(dirs) == 0 {
		return nil, errors.New("merge: no shard directories given")
	}
	return dirs, nil
}

// readShardDir reads a shard's manifest and configuration, and checks that the
// configuration is the one the manifest names.
func readShardDir(dir string) (shardDir, error) {
	s := shardDir{path: dir}
	data, err := os.ReadFile(filepath.Join(dir, ShardFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("merge: %s: no %s: not the output of a -shard run", dir, ShardFile)
	} else if err != nil {
		return s, fmt.Errorf("merge: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.m); err != nil {
		return s, fmt.Errorf("merge: %s: %w", filepath.Join(dir, ShardFile), err)
	}
	if s.shard, err = sweep.ParseShard(s.m.Shard); err != nil {
		return s, fmt.Errorf("merge: %s: %w", filepath.Join(dir, ShardFile), err)
	}
	if s.cfg, err = os.ReadFile(filepath.Join(dir, results.ConfigFile)); err != nil {
		return s, fmt.Errorf("merge: %w", err)
	}
	if h := configHash(s.cfg); h != s.m.ConfigSHA256 {
		return s, fmt.Errorf("merge: %s: %s has changed since the shard ran (sha256 %s, shard.json says %s)",
			dir, results.ConfigFile, h[:12], short(s.m.ConfigSHA256))
	}
	return s, nil
}

func short(h string) string { return h[:min(len(h), 12)] }

// checkShards checks that the shards are the n parts of one sweep, each once and complete,
// and sorts them by shard index.
func checkShards(shards []shardDir) error {
	first := shards[0]
	n := first.shard.Count
	for _, s := range shards[1:] {
		switch {
		case s.m.ConfigSHA256 != first.m.ConfigSHA256:
			return fmt.Errorf("merge: %s and %s ran different configurations or seeds (config.yaml sha256 %s and %s)",
				first.path, s.path, short(first.m.ConfigSHA256), short(s.m.ConfigSHA256))
		case s.shard.Count != n:
			return fmt.Errorf("merge: %s is shard %s and %s is shard %s: one sweep has one shard count", first.path, first.m.Shard, s.path, s.m.Shard)
		case s.m.PlanRuns != first.m.PlanRuns:
			return fmt.Errorf("merge: %s and %s disagree on the plan's runs (%d and %d)", first.path, s.path, first.m.PlanRuns, s.m.PlanRuns)
		}
	}
	slices.SortStableFunc(shards, func(a, b shardDir) int { return a.shard.Index - b.shard.Index })
	var missing []string
	for i, k := 0, 0; i < n; i++ {
		if k < len(shards) && shards[k].shard.Index == i {
			if k+1 < len(shards) && shards[k+1].shard.Index == i {
				return fmt.Errorf("merge: shard %d/%d given twice: %s and %s", i, n, shards[k].path, shards[k+1].path)
			}
			k++
			continue
		}
		missing = append(missing, fmt.Sprintf("%d/%d", i, n))
	}
	if len(missing) > 0 {
		return fmt.Errorf("merge: %d of %d shards missing: %s", len(missing), n, abbreviate(missing))
	}
	for _, s := range shards {
		if err := checkShardRuns(s); err != nil {
			return err
		}
	}
	return nil
}

// checkShardRuns checks that a shard finished every run of its part of the plan.
func checkShardRuns(s shardDir) error {
	want := s.shard.Positions(s.m.PlanRuns)
	got := make([]int, len(s.m.Runs))
	for i, r := range s.m.Runs {
		got[i] = r.Index
	}
	if slices.Equal(want, got) {
		return nil
	}
	var missing []string
	for _, i := range want {
		if !slices.Contains(got, i) {
			missing = append(missing, fmt.Sprint(i))
		}
	}
	if len(missing) == 0 {
		return fmt.Errorf("merge: %s: shard %s lists runs %v, want %v", s.path, s.m.Shard, got, want)
	}
	return fmt.Errorf("merge: %s: shard %s did not finish %d of its %d runs (plan indices %s): rerun it",
		s.path, s.m.Shard, len(missing), len(want), abbreviate(missing))
}

// abbreviate joins up to ten items and counts the rest.
func abbreviate(items []string) string {
	if len(items) <= 10 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:10], ", "), len(items)-10)
}

// mergedRuns reads the shards' runs and puts them in plan order.
func mergedRuns(shards []shardDir) ([]results.Run, error) {
	runs := make([]results.Run, shards[0].m.PlanRuns)
	for _, s := range shards {
		got, err := results.ReadSummary(s.path)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		if len(got) != len(s.m.Runs) {
			return nil, fmt.Errorf("merge: %s: summary.json has %d runs, shard.json %d", s.path, len(got), len(s.m.Runs))
		}
		for k, r := range s.m.Runs {
			if got[k].Name != r.Name {
				return nil, fmt.Errorf("merge: %s: run %d is %q in summary.json and %q in shard.json", s.path, k, got[k].Name, r.Name)
			}
			runs[r.Index] = got[k]
		}
	}
	return runs, nil
}

// mergeRequests writes out's requests.csv: the header once, then every run's rows in
// plan order, copied from the shards' requests.csv.
func mergeRequests(out string, shards []shardDir) error {
	type source struct {
		f   *os.File
		run shardRun
	}
	rows := make([]source, shards[0].m.PlanRuns)
	var header []byte
	for _, s := range shards {
		f, err := os.Open(filepath.Join(s.path, results.RequestsFile))
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		defer f.Close()
		if s.m.HeaderBytes > 0 {
			h := make([]byte, s.m.HeaderBytes)
			if _, err := f.ReadAt(h, 0); err != nil {
				return fmt.Errorf("merge: %s: %w", f.Name(), err)
			}
			if header != nil && !bytes.Equal(h, header) {
				return fmt.Errorf("merge: %s: its header differs from the other shards'", f.Name())
			}
			header = h
		}
		for _, r := range s.m.Runs {
			rows[r.Index] = source{f, r}
		}
	}
	dst, err := os.Create(filepath.Join(out, results.RequestsFile))
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	w := bufio.NewWriterSize(dst, 1<<16)
	w.Write(header)
	for _, src := range rows {
		n, err := io.Copy(w, io.NewSectionReader(src.f, src.run.RowsOffset, src.run.RowsBytes))
		if err == nil && n != src.run.RowsBytes {
			err = fmt.Errorf("%s: run %q: %d of %d bytes of rows", src.f.Name(), src.run.Name, n, src.run.RowsBytes)
		}
		if err != nil {
			dst.Close()
			return fmt.Errorf("merge: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		dst.Close()
		return fmt.Errorf("merge: %w", err)
	}
	return dst.Close()
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// runMerge is simulate -merge -out DIR SHARD...: exit status 0 when merged, 1 when the
// shards cannot be merged or the output cannot be written, 2 without -out.
func runMerge(o options, stdout, stderr io.Writer) int {
	if o.out == "" {
		fmt.Fprintln(stderr, "simulate: merge: -out is required: the directory the merged results go to")
		return 2
	}
	n, err := mergeShards(o.out, o.dirs)
	if err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "merged %d shards into %s\n", n, o.out)
	return 0
}
