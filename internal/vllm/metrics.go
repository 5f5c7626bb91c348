package vllm

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names read by Parse and written by Write.
const (
	NameRunning        = "vllm:num_requests_running"
	NameWaiting        = "vllm:num_requests_waiting"
	NameKVUsage        = "vllm:kv_cache_usage_perc"
	NameGPUCacheUsage  = "vllm:gpu_cache_usage_perc" // the name of NameKVUsage before vLLM 0.9
	NameCacheConfig    = "vllm:cache_config_info"
	NamePrefixQueries  = "vllm:prefix_cache_queries_total"
	NamePrefixHits     = "vllm:prefix_cache_hits_total"
	nameSGLangRunning  = "sglang:num_running_reqs"
	nameSGLangWaiting  = "sglang:num_queue_reqs"
	nameSGLangKVUsage  = "sglang:token_usage"
	labelModel         = "model_name"
	labelEngine        = "engine"
	labelNumGPUBlocks  = "num_gpu_blocks"
	labelBlockSize     = "block_size"
	defaultEngineLabel = "0"
)

// ErrNoLoadMetrics means a page has neither a running nor a waiting request gauge: the
// server is not vLLM (or SGLang), or its metrics are disabled.
var ErrNoLoadMetrics = errors.New("vllm: no request-count gauges on the metrics page")

// Engine is one engine's (one data-parallel rank's) series of a metrics page.
type Engine struct {
	// Model is the model_name label; Index is the engine label (0 when absent).
	Model string
	Index int
	// Running and Waiting are vllm:num_requests_running and vllm:num_requests_waiting.
	Running, Waiting int
	// KVUsage is vllm:kv_cache_usage_perc (or the older vllm:gpu_cache_usage_perc): the
	// fraction of KV blocks in use, 0..1.
	KVUsage float64
	// NumGPUBlocks and BlockSize are the num_gpu_blocks and block_size labels of
	// vllm:cache_config_info (block_size in tokens); 0 when unknown.
	NumGPUBlocks, BlockSize int
	// PrefixCacheQueries and PrefixCacheHits are the cumulative prefix-cache counters, in tokens.
	PrefixCacheQueries, PrefixCacheHits float64
}

// Metrics is one server's page aggregated over its engines.
type Metrics struct {
	// Engines is the number of engines the page reported.
	Engines int
	// Models lists the model_name label values, sorted and without duplicates.
	Models []string
	// Running and Waiting are summed over the engines.
	Running, Waiting int
	// KVUsage is the engines' KV usage (0..1) averaged, weighted by NumGPUBlocks when every
	// engine reports it.
	KVUsage float64
	// NumGPUBlocks is summed over the engines (0 when any engine does not report it);
	// BlockSize is the first engine's block size in tokens.
	NumGPUBlocks, BlockSize int
	// PrefixCacheQueries and PrefixCacheHits are summed over the engines, in tokens.
	PrefixCacheQueries, PrefixCacheHits float64
}

// Page is a metrics page parsed once, to be read as engines (Engines), as one server's
// Metrics (Metrics) and as histograms (Histograms) without parsing its text again. The zero
// Page is an empty page.
type Page struct {
	families map[string]*dto.MetricFamily
}

// ParsePage reads a metrics page in the Prometheus text format, up to the end of r.
func ParsePage(r io.Reader) (Page, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Page{}, fmt.Errorf("vllm: parse metrics: %w", err)
	}
	return Page{families: families}, nil
}

// Parse reads a metrics page and aggregates it over its engines.
func Parse(r io.Reader) (Metrics, error) {
	p, err := ParsePage(r)
	if err != nil {
		return Metrics{}, err
	}
	return p.Metrics()
}

// ParseEngines reads a metrics page into its engines, as Page.Engines.
func ParseEngines(r io.Reader) ([]Engine, error) {
	p, err := ParsePage(r)
	if err != nil {
		return nil, err
	}
	return p.Engines()
}

// Metrics aggregates the page over its engines; it fails as Engines does.
func (p Page) Metrics() (Metrics, error) {
	engines, err := p.Engines()
	if err != nil {
		return Metrics{}, err
	}
	return Aggregate(engines), nil
}

// Engines returns one Engine per (model_name, engine) label pair of the page, sorted by model
// and engine index. Cache configuration series, which carry no model label, apply to every
// engine of the same index. A page without request-count gauges is ErrNoLoadMetrics.
func (p Page) Engines() ([]Engine, error) {
	families := p.families
	c := collector{byKey: map[engineKey]*Engine{}}
	seen := false
	for _, name := range []string{NameRunning, NameWaiting, nameSGLangRunning, nameSGLangWaiting} {
		seen = seen || families[name] != nil
	}
	if !seen {
		return nil, ErrNoLoadMetrics
	}
	c.gauge(families[NameRunning], func(e *Engine, v float64) { e.Running = count(v) })
	c.gauge(families[NameWaiting], func(e *Engine, v float64) { e.Waiting = count(v) })
	c.gauge(families[nameSGLangRunning], func(e *Engine, v float64) { e.Running = count(v) })
	c.gauge(families[nameSGLangWaiting], func(e *Engine, v float64) { e.Waiting = count(v) })
	kv := families[NameKVUsage]
	if kv == nil {
		kv = families[NameGPUCacheUsage]
	}
	if kv == nil {
		kv = families[nameSGLangKVUsage]
	}
	c.gauge(kv, func(e *Engine, v float64) { e.KVUsage = fraction(v) })
	c.gauge(families[NamePrefixQueries], func(e *Engine, v float64) { e.PrefixCacheQueries = nonNegative(v) })
	c.gauge(families[NamePrefixHits], func(e *Engine, v float64) { e.PrefixCacheHits = nonNegative(v) })
	c.cacheConfig(families[NameCacheConfig])
	return c.engines(), nil
}

type engineKey struct {
	model string
	index int
}

type cacheInfo struct{ blocks, blockSize int }

type collector struct {
	byKey map[engineKey]*Engine
	cache map[int]cacheInfo
}

// gauge applies set to every sample of f (gauge, counter or untyped) on its engine.
func (c *collector) gauge(f *dto.MetricFamily, set func(*Engine, float64)) {
	if f == nil {
		return
	}
	for _, m := range f.GetMetric() {
		var v float64
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Untyped != nil:
			v = m.Untyped.GetValue()
		default:
			continue
		}
		k := engineKey{model: label(m, labelModel), index: engineIndex(m)}
		e := c.byKey[k]
		if e == nil {
			e = &Engine{Model: k.model, Index: k.index}
			c.byKey[k] = e
		}
		set(e, v)
	}
}

func (c *collector) cacheConfig(f *dto.MetricFamily) {
	if f == nil {
		return
	}
	c.cache = map[int]cacheInfo{}
	for _, m := range f.GetMetric() {
		blocks, _ := strconv.Atoi(label(m, labelNumGPUBlocks))
		size, _ := strconv.Atoi(label(m, labelBlockSize))
		c.cache[engineIndex(m)] = cacheInfo{blocks: max(blocks, 0), blockSize: max(size, 0)}
	}
}

func (c *collector) engines() []Engine {
	out := make([]Engine, 0, len(c.byKey))
	for _, e := range c.byKey {
		if ci, ok := c.cache[e.Index]; ok {
			e.NumGPUBlocks, e.BlockSize = ci.blocks, ci.blockSize
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Engine) int {
		if a.Model != b.Model {
			if a.Model < b.Model {
				return -1
			}
			return 1
		}
		return a.Index - b.Index
	})
	return out
}

// Aggregate sums or averages the engines of one server into its Metrics.
func Aggregate(engines []Engine) Metrics {
	m := Metrics{Engines: len(engines)}
	allBlocks := len(engines) > 0
	var kvSum, kvWeighted float64
	for _, e := range engines {
		m.Running += e.Running
		m.Waiting += e.Waiting
		m.PrefixCacheQueries += e.PrefixCacheQueries
		m.PrefixCacheHits += e.PrefixCacheHits
		m.NumGPUBlocks += e.NumGPUBlocks
		kvSum += e.KVUsage
		kvWeighted += e.KVUsage * float64(e.NumGPUBlocks)
		allBlocks = allBlocks && e.NumGPUBlocks > 0
		if e.Model != "" && !slices.Contains(m.Models, e.Model) {
			m.Models = append(m.Models, e.Model)
		}
		if m.BlockSize == 0 {
			m.BlockSize = e.BlockSize
		}
	}
	slices.Sort(m.Models)
	switch {
	case allBlocks:
		m.KVUsage = kvWeighted / float64(m.NumGPUBlocks)
	case len(engines) > 0:
		m.KVUsage = kvSum / float64(len(engines))
		m.NumGPUBlocks = 0
	}
	return m
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func engineIndex(m *dto.Metric) int {
	i, err := strconv.Atoi(label(m, labelEngine))
	if err != nil || i < 0 {
		return 0
	}
	return i
}

// count converts a gauge value to a request count, clamping NaN and negatives to 0.
func count(v float64) int {
	if !(v > 0) || math.IsInf(v, 0) {
		return 0
	}
	return int(math.Round(min(v, math.MaxInt32)))
}

// fraction clamps a usage gauge into [0, 1].
func fraction(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, 1)
}

func nonNegative(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
