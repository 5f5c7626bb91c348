package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"kvroute/internal/tune"
	"kvroute/sweep"
)

// errRoundShared ends a shard's search at a round it has run its part of: the rest of the
// round is other shards' work, and the search continues when all of them are cached.
var errRoundShared = errors.New("the round is shared with other shards")

// trialCache keeps every trial's objective value in JSON lines in a policy's tune
// directory, so a search resumes where it stopped and shards of one search share their
// rounds: each shard appends to its own file and reads everyone's.
type trialCache struct {
	file   string
	shard  sweep.Shard
	config string // the point's resolved configuration's hash: lines of another are ignored
	obj    string
	values map[string]float64
	ran    int // trials this process simulated
}

// cachedTrial is one line of a trials file.
type cachedTrial struct {
	Config    string `json:"config"`
	Objective string `json:"objective"`
	Policy    string `json:"policy"`
	Rep       int    `json:"rep"`
	Value     string `json:"value"` // strconv 'g' form, which also holds ±Inf
}

// openTrialCache reads the trials files in dir: trials.jsonl, trials-I-of-N.jsonl.
func openTrialCache(dir string, sh sweep.Shard, p sweep.Point, obj tune.Objective) (*trialCache, error) {
	cfg, err := sweep.ResolvedConfig([]sweep.Point{p})
	if err != nil {
		return nil, err
	}
	name := "trials.jsonl"
	if !sh.Whole() {
		name = fmt.Sprintf("trials-%d-of-%d.jsonl", sh.Index, sh.Count)
	}
	c := &trialCache{file: filepath.Join(dir, name), shard: sh, config: configHash(cfg), obj: obj.Name, values: map[string]float64{}}
	files, err := filepath.Glob(filepath.Join(dir, "trials*.jsonl"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := c.read(f); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *trialCache) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var t cachedTrial
		if json.Unmarshal(sc.Bytes(), &t) != nil || t.Config != c.config || t.Objective != c.obj {
			continue // a torn last line, another configuration's trial
		}
		if v, err := strconv.ParseFloat(t.Value, 64); err == nil {
			c.values[trialKey(t.Policy, t.Rep)] = v
		}
	}
	return sc.Err()
}

func trialKey(policy string, rep int) string { return policy + "#" + strconv.Itoa(rep) }

// runner wraps run: cached trials are read back; of the others this shard runs every n-th
// and, unless it is the whole search, stops the search with errRoundShared.
func (c *trialCache) runner(run tune.Runner) tune.Runner {
	return func(ctx context.Context, trials []tune.Trial) ([]float64, error) {
		var missing []int
		for i, t := range trials {
			if _, ok := c.values[trialKey(t.Spec.Label(), t.Rep)]; !ok {
				missing = append(missing, i)
			}
		}
		mine := sweep.Select(c.shard, missing)
		if len(mine) > 0 {
			batch := make([]tune.Trial, len(mine))
			for k, i := range mine {
				batch[k] = trials[i]
			}
			vals, err := run(ctx, batch)
			if err != nil {
				return nil, err
			}
			if err := c.append(batch, vals); err != nil {
				return nil, err
			}
		}
		if len(mine) < len(missing) {
			return nil, errRoundShared
		}
		out := make([]float64, len(trials))
		for i, t := range trials {
			out[i] = c.values[trialKey(t.Spec.Label(), t.Rep)]
		}
		return out, nil
	}
}

// append records trials and their values in memory and in the shard's file.
func (c *trialCache) append(trials []tune.Trial, vals []float64) error {
	if err := os.MkdirAll(filepath.Dir(c.file), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(c.file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i, t := range trials {
		key := t.Spec.Label()
		c.values[trialKey(key, t.Rep)] = vals[i]
		c.ran++
		line := cachedTrial{Config: c.config, Objective: c.obj, Policy: key, Rep: t.Rep, Value: strconv.FormatFloat(vals[i], 'g', -1, 64)}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
