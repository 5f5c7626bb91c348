package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kvroute/internal/loadgen"
)

// benchInfo describes a run for its vllm bench JSON.
func benchInfo(o options, j job, model string, start time.Time) loadgen.BenchInfo {
	a := j.point.Workload().Resolve().Arrival
	return loadgen.BenchInfo{
		Date: start.Format("20060102-150405"), Backend: "openai-chat", EndpointType: "openai-chat",
		Label: j.name, ModelID: model, RequestRate: a.Rate, Burstiness: a.Burstiness,
		MaxConcurrency: o.maxConcurrency, SLO: j.point.SLO(),
	}
}

// benchPath is -bench-json for a file without axes, and the path with the point's label
// before the extension otherwise ("bench.json" → "bench-rate=10.json").
func benchPath(path string, j job) string {
	l := j.point.Label()
	if l == "base" {
		return path
	}
	ext := filepath.Ext(path)
	safe := strings.NewReplacer("/", "_", ",", "_", " ", "_").Replace(l)
	return strings.TrimSuffix(path, ext) + "-" + safe + ext
}

func writeBench(path string, b *loadgen.Bench, elapsed time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := b.WriteJSON(w, elapsed); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
