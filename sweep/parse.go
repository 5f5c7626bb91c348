package sweep

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"kvroute/gpumodel"
	"kvroute/internal/strictyaml"
	"kvroute/workloads"
)

// File is a sweep file: one base scenario, in which any list of scalars under fleet, workload,
// arrival or router (and requests, duration) is a sweep axis; the runs are the cartesian
// product of the axes times the policies.
type File struct {
	// Name names the sweep: its runs and the default results directory (out/<name>).
	Name string `yaml:"name"`
	// Seed is the master seed: the workload, the policies' random sources and the simulator
	// each draw a stream derived from it (default 0).
	Seed uint64 `yaml:"seed"`
	// Catalog is an optional YAML or JSON file of extra GPUs and models (gpumodel's catalog
	// format), relative to the working directory; fleet.gpu and fleet.model may name them.
	Catalog string `yaml:"catalog,omitempty"`
	// Requests caps each run at this many requests, turns included (0: no cap).
	Requests int `yaml:"requests,omitempty"`
	// Duration caps each run at the requests arriving before this offset; sessions started
	// before it finish their turns (0: no cap).
	Duration time.Duration `yaml:"duration,omitempty"`
	// Fleet is the simulated fleet: the replica count and what each replica runs.
	Fleet FleetConfig `yaml:"fleet"`
	// Workload says what the requests are; which keys apply depends on its kind
	// (workloads/doc.go has every default).
	Workload workloads.WorkloadConfig `yaml:"workload"`
	// Arrival says when sessions start.
	Arrival workloads.ArrivalConfig `yaml:"arrival"`
	// Router is the router's view of the fleet: metrics staleness, network delay, retries
	// and router replicas.
	Router RouterConfig `yaml:"router"`
	// Failures takes replicas down and back up during each run (docs/lifecycle.md).
	Failures []FailureConfig `yaml:"failures,omitempty"`
	// Policies are the routing policies every point runs, each a name or {name: NAME,
	// PARAM: VALUE, ...} (docs/policies.md); on a fleet split into prefill and decode pools
	// also a P/D spec {name: LABEL, decider: SPEC, prefill: SPEC, decode: SPEC} or a shipped
	// P/D profile's name (llm-d-pd, dynamo-pd, ...; docs/pd.md); at least one.
	Policies []PolicySpec `yaml:"policies"`
	// SLO sets latency objectives; when set, the results add goodput.
	SLO SLOConfig `yaml:"slo,omitempty"`

	// Replications is how many workload seeds every point runs (0 or 1: one, the file's
	// seed). Replication k of a point uses the same requests for every policy, so policies
	// are compared by paired differences across replications.
	Replications int `yaml:"replications,omitempty"`
}

// FleetConfig is the simulated fleet: how many replicas, and what each runs. cmd/emulate
// serves the same section (-fleet) and each entry of cmd/route's hardware section is its
// ReplicaConfig, so a fleet is simulated, emulated and priced live from one description.
type FleetConfig struct {
	// Replicas is the number of identical replicas, 1..4096, of an aggregated fleet (no
	// pools, or split aggregated).
	Replicas int `yaml:"replicas"`
	// ReplicaConfig is what every replica runs; its keys sit inline in the fleet section.
	ReplicaConfig `yaml:",inline"`
	// Pools splits the fleet into prefill and decode pools (docs/pd.md): each
	// {role: prefill|decode, replicas: N, KEY: VALUE...}, any replica key set per pool and
	// the others the fleet's. Absent: one aggregated pool of fleet.replicas.
	Pools []PoolConfig `yaml:"pools,omitempty"`
	// Split is the pools as one scalar, so that a list of them is a sweep axis:
	// "aggregated" (fleet.replicas, no pools), or "NP+MD" with an optional "(tpK)" per
	// pool ("4P+4D", "8P(tp1)+2D(tp4)"). Not with pools.
	Split string `yaml:"split,omitempty"`
	// KVTransfer is the KV transfer between a split fleet's prefill and decode replicas.
	KVTransfer KVTransferConfig `yaml:"kv_transfer,omitempty"`
}

// ReplicaConfig is one vLLM replica: the hardware, the model and the engine arguments that
// change its KV capacity, batching or semantics. Zero values keep vLLM's defaults.
type ReplicaConfig struct {
	// GPU is a catalog name or alias ("H100-SXM-80GB").
	GPU string `yaml:"gpu"`
	// Model is a catalog name or alias ("llama-3.1-8b").
	Model string `yaml:"model"`
	// TP is the tensor-parallel size in GPUs (0: 1).
	TP int `yaml:"tp"`
	// NumBlocks overrides each replica's KV capacity in 16-token blocks (0: from the GPU).
	NumBlocks int `yaml:"num_blocks,omitempty"`
	// MemoryUtilization is vLLM's gpu_memory_utilization, a fraction in (0, 1] (0: 0.9).
	MemoryUtilization float64 `yaml:"gpu_memory_utilization,omitempty"`
	// Quantization is vLLM's --quantization: fp8, or none (empty: the model's own).
	Quantization string `yaml:"quantization,omitempty"`
	// KVCacheDType is vLLM's --kv-cache-dtype: auto (empty: the model's dtype) or fp8.
	KVCacheDType string `yaml:"kv_cache_dtype,omitempty"`
	// MaxNumBatchedTokens is vLLM's --max-num-batched-tokens (0: vLLM's default for the GPU).
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens,omitempty"`
	// MaxNumSeqs is vLLM's --max-num-seqs (0: vLLM's default for the GPU).
	MaxNumSeqs int `yaml:"max_num_seqs,omitempty"`
	// DisableCustomAllReduce is vLLM's --disable-custom-all-reduce: a TP replica's
	// all-reduces run through NCCL instead of vLLM's custom kernel (gpumodel.GPU).
	DisableCustomAllReduce bool `yaml:"disable_custom_all_reduce,omitempty"`
	// VLLM names the vLLM release whose semantics the simulated engine follows (empty: the
	// newest modelled); the simulator checks the name.
	VLLM string `yaml:"vllm,omitempty"`
	// NumSchedulerSteps is vLLM V0's --num-scheduler-steps (0: one), for vllm v0.6 only.
	NumSchedulerSteps int `yaml:"num_scheduler_steps,omitempty"`
	// KVOffloadingSize is vLLM's --kv-offloading-size with --kv-offloading-backend native:
	// a CPU KV tier of this many GiB per replica (all its GPUs together), filled by
	// write-through offload of completed blocks and read back on a prefix hit past the
	// GPU's (0: no tier, the default; docs/simulator.md, "CPU KV tier").
	KVOffloadingSize float64 `yaml:"kv_offloading_size,omitempty"`
	// KVOffloadingBlockSize is the CPU tier's block size in tokens, the offloading
	// connector's block_size: a multiple of the GPU block size (0: the GPU block size).
	KVOffloadingBlockSize int `yaml:"kv_offloading_block_size,omitempty"`
	// KVOffloadingPromptOnly is the offloading connector's offload_prompt_only: true (the
	// default, when absent) offloads prompt blocks only, false the blocks generated while
	// decoding too.
	KVOffloadingPromptOnly *bool `yaml:"kv_offloading_prompt_only,omitempty"`
	// KVOffloadingEvictionPolicy is the offloading connector's eviction_policy, how the CPU
	// tier picks the blocks to drop when full: lru (the default, when absent) or arc
	// (adaptive replacement: blocks used again outlive blocks used once).
	KVOffloadingEvictionPolicy string `yaml:"kv_offloading_eviction_policy,omitempty"`
}

// RouterConfig is the router's view of the fleet.
type RouterConfig struct {
	// MetricsInterval is how often the router scrapes the replicas' metrics (0: the router
	// sees them exact at every decision), as cmd/route's health.metrics_interval.
	MetricsInterval time.Duration `yaml:"metrics_interval"`
	// NetworkDelay is the one-way router↔replica latency, added to request delivery and to
	// the first token and completion as the client sees them (default 0).
	NetworkDelay time.Duration `yaml:"network_delay,omitempty"`
	// MaxRetries is how often a request a failed replica aborted is re-routed; absent means
	// cluster.DefaultMaxRetries (2) and 0 means never, as cmd/route's limits.max_retries.
	MaxRetries *int `yaml:"max_retries,omitempty"`
	// Replicas is the number of router replicas (0 or 1: one), each with its own policy
	// state.
	Replicas int `yaml:"replicas,omitempty"`
	// Assign is how a request picks a router replica: random (the default, a hash of the
	// request id) or affinity (a hash of its session).
	Assign string `yaml:"assign,omitempty"`
	// EventDelay is how long KV events take to reach the routers (default 0).
	EventDelay time.Duration `yaml:"event_delay,omitempty"`
}

// FailureConfig takes a replica down at At and back at RecoverAt (0: never).
type FailureConfig struct {
	// Replica is the index of the replica that fails, from 0.
	Replica int `yaml:"replica"`
	// At is when it fails, from the run's start; it aborts the requests it holds.
	At time.Duration `yaml:"at"`
	// RecoverAt is when it is back, from the run's start (0: never).
	RecoverAt time.Duration `yaml:"recover_at,omitempty"`
}

// SLOConfig sets goodput thresholds in milliseconds (0: unset).
type SLOConfig struct {
	// TTFTMs bounds the time to first token, in milliseconds (0: not checked).
	TTFTMs float64 `yaml:"ttft_ms,omitempty"`
	// TPOTMs bounds the time per output token after the first, in milliseconds (0: not checked).
	TPOTMs float64 `yaml:"tpot_ms,omitempty"`
	// E2EMs bounds the end-to-end latency, in milliseconds (0: not checked).
	E2EMs float64 `yaml:"e2e_ms,omitempty"`
}

// Point is one scenario of a sweep: the file with every axis fixed, and the axis values that
// name it.
type Point struct {
	File
	Axes  []AxisValue
	lines map[string]int   // the first line of each field's path in the file
	cat   gpumodel.Catalog // the GPU and model catalog the fleet is looked up in (Parse)
}

// Line returns the line of the sweep file where the field at path ("fleet.vllm") is set, or
// 0 when the file does not set it.
func (p Point) Line(path string) int { return p.lines[path] }

// AxisValue is one swept field's value at a point.
type AxisValue struct {
	Path  string // e.g. "arrival.rate"
	Value string
}

// sweepable are the sections whose scalar lists are sweep axes.
var sweepable = map[string]bool{"fleet": true, "workload": true, "arrival": true, "router": true}

// Expand reads a sweep file strictly and expands it into points; name labels errors. It checks
// the shape of the file, not its values (see Point.Validate), and loads no catalog: Parse does
// both, for points that are to be simulated.
func Expand(data []byte, name string) ([]Point, error) {
	root, err := strictyaml.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if root == nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a mapping at the top level", name)
	}
	axes := collectAxes(root.Content[0], "")
	lines := strictyaml.Fields(root.Content[0])
	var points []Point
	err = expand(root.Content[0], axes, 0, nil, func(doc *yaml.Node, vals []AxisValue) error {
		var f File
		if err := strictyaml.DecodeNode(doc, &f); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		points = append(points, Point{File: f, Axes: append([]AxisValue(nil), vals...), lines: lines})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return points, nil
}

type axis struct {
	path   string
	parent *yaml.Node // the mapping holding the key
	index  int        // index of the value node in parent.Content
	values []*yaml.Node
}

// collectAxes finds sequences of scalars under the sweepable sections and requests/duration.
func collectAxes(m *yaml.Node, prefix string) []axis {
	var out []axis
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i].Value, m.Content[i+1]
		path := strings.TrimPrefix(prefix+"."+key, ".")
		switch {
		case prefix == "" && sweepable[key] && val.Kind == yaml.MappingNode:
			out = append(out, collectAxes(val, key)...)
		case (prefix != "" || key == "requests" || key == "duration" || key == "seed") && isScalarList(val):
			out = append(out, axis{path: path, parent: m, index: i + 1, values: val.Content})
		}
	}
	return out
}

func isScalarList(n *yaml.Node) bool {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return false
	}
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// expand visits every combination of axis values, in file order with the last axis fastest.
func expand(doc *yaml.Node, axes []axis, k int, vals []AxisValue, visit func(*yaml.Node, []AxisValue) error) error {
	if k == len(axes) {
		return visit(doc, vals)
	}
	a := axes[k]
	orig := a.parent.Content[a.index]
	defer func() { a.parent.Content[a.index] = orig }()
	for _, v := range a.values {
		a.parent.Content[a.index] = v
		if err := expand(doc, axes, k+1, append(vals, AxisValue{a.path, v.Value}), visit); err != nil {
			return err
		}
	}
	return nil
}

// Label names a point by its axis values ("base" when nothing is swept).
func (p Point) Label() string {
	if len(p.Axes) == 0 {
		return "base"
	}
	parts := make([]string, len(p.Axes))
	for i, a := range p.Axes {
		parts[i] = a.Path[strings.LastIndexByte(a.Path, '.')+1:] + "=" + a.Value
	}
	return strings.Join(parts, ",")
}
