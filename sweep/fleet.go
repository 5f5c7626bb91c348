package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"kvroute/gpumodel"
	"kvroute/sim/engine"
)

// MaxFleetReplicas bounds FleetConfig.Replicas.
const MaxFleetReplicas = 4096

// KeyError is a bad value of one configuration key. Key is the key's dotted path
// ("fleet.vllm", "hardware.gpu-a.tp"), which callers may map to a line of their file; Err's
// message starts with that path.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// keyErr returns a *KeyError for section.key whose message is the path then msg.
func keyErr(section, key, format string, args ...any) error {
	path := section + "." + key
	return &KeyError{Key: path, Err: fmt.Errorf("%s"+format, append([]any{path}, args...)...)}
}

// Engines resolves the fleet against cat into its replicas' engine configurations: all
// equal, or a split fleet's pools one after another (PoolEngines). Errors are *KeyError
// values under section ("fleet"), joined.
func (f FleetConfig) Engines(cat gpumodel.Catalog, section string) ([]engine.Config, error) {
	if f.Disaggregated() {
		pools, err := f.PoolEngines(cat, section)
		var out []engine.Config
		for _, p := range pools {
			out = append(out, p.Engines...)
		}
		return out, err
	}
	var errs []error
	if f.Replicas < 1 || f.Replicas > MaxFleetReplicas {
		errs = append(errs, keyErr(section, "replicas", " %d: want 1..%d", f.Replicas, MaxFleetReplicas))
	}
	ec, err := f.ReplicaConfig.Engine(cat, section)
	if err != nil || len(errs) > 0 {
		return nil, errors.Join(append(errs, err)...)
	}
	out := make([]engine.Config, f.Replicas)
	for i := range out {
		out[i] = ec
	}
	return out, nil
}

// Engine resolves r against cat into one replica's engine configuration: the one function
// by which the simulator builds its replicas, cmd/emulate serves them and cmd/route prices
// them. Errors are *KeyError values under section ("fleet", "hardware.gpu-a"), joined.
func (r ReplicaConfig) Engine(cat gpumodel.Catalog, section string) (engine.Config, error) {
	var errs []error
	g, err := cat.GPU(r.GPU)
	if err != nil {
		errs = append(errs, keyErr(section, "gpu", ": %w", err))
	}
	m, err := cat.Model(r.Model)
	if err != nil {
		errs = append(errs, keyErr(section, "model", ": %w", err))
	}
	if r.TP < 0 {
		errs = append(errs, keyErr(section, "tp", " %d: want >= 1 (0: 1)", r.TP))
	}
	if r.NumBlocks < 0 {
		errs = append(errs, keyErr(section, "num_blocks", " %d: want >= 0", r.NumBlocks))
	}
	if u := r.MemoryUtilization; !(u >= 0 && u <= 1) {
		errs = append(errs, keyErr(section, "gpu_memory_utilization", " %v: want a fraction in (0, 1] (0: 0.9)", u))
	}
	rel, err := engine.ParseRelease(r.VLLM)
	if err != nil {
		errs = append(errs, keyErr(section, "vllm", ": %w", err))
	} else if err := r.checkV0(rel, section); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return engine.Config{}, errors.Join(errs...)
	}
	d, err := r.deployment(g, m, section)
	if err != nil {
		return engine.Config{}, err
	}
	off, err := r.offload(d, rel, section)
	if err != nil {
		return engine.Config{}, err
	}
	return engine.Config{Deployment: d, NumBlocks: r.NumBlocks, Release: rel, SchedulerSteps: r.NumSchedulerSteps,
		Offload: off}, nil
}

// offload is the CPU KV tier r asks for on deployment d (the zero value: none).
func (r ReplicaConfig) offload(d gpumodel.Deployment, rel engine.Release, section string) (engine.OffloadConfig, error) {
	size := r.KVOffloadingSize
	if !(size >= 0 && size < 1<<30) {
		return engine.OffloadConfig{}, keyErr(section, "kv_offloading_size", " %v: want GiB in [0, 2^30)", size)
	}
	if size == 0 {
		if r.KVOffloadingBlockSize != 0 || r.KVOffloadingPromptOnly != nil || r.KVOffloadingEvictionPolicy != "" {
			return engine.OffloadConfig{}, keyErr(section, "kv_offloading_size", " is 0: kv_offloading_block_size, "+
				"kv_offloading_prompt_only and kv_offloading_eviction_policy need a CPU tier")
		}
		return engine.OffloadConfig{}, nil
	}
	if rel.V0Scheduler {
		return engine.OffloadConfig{}, keyErr(section, "kv_offloading_size", ": vLLM %s has no offloading connector (V1 only)", rel.Name)
	}
	c := engine.OffloadConfig{Bytes: int64(size * gpumodel.GiB), BlockSize: r.KVOffloadingBlockSize,
		Decode: r.KVOffloadingPromptOnly != nil && !*r.KVOffloadingPromptOnly, Eviction: r.KVOffloadingEvictionPolicy}
	if err := engine.CheckEviction(c.Eviction); err != nil {
		return engine.OffloadConfig{}, &KeyError{Key: section + ".kv_offloading_eviction_policy", Err: fmt.Errorf("%s.%w", section, err)}
	}
	if err := c.Validate(d); err != nil {
		return engine.OffloadConfig{}, &KeyError{Key: section + ".kv_offloading_size", Err: fmt.Errorf("%s.kv_offloading_size: %w", section, err)}
	}
	return c, nil
}

// checkV0 checks the engine arguments that only V0 takes or that V0 needs set:
// num_scheduler_steps above 1 is V0's, and V0 needs max_num_batched_tokens from the file,
// since its own default without chunked prefill, max(max_model_len, 2048), depends on a
// max_model_len the simulator does not model (the V1 default would silently reject every
// prompt longer than it).
func (r ReplicaConfig) checkV0(rel engine.Release, section string) error {
	if err := rel.CheckSchedulerSteps(r.NumSchedulerSteps); err != nil {
		return &KeyError{Key: section + ".num_scheduler_steps", Err: fmt.Errorf("%s.%w", section, err)}
	}
	if rel.V0Scheduler && r.MaxNumBatchedTokens == 0 {
		return keyErr(section, "vllm", " %s needs %s.max_num_batched_tokens: V0 without chunked prefill "+
			"defaults it to max(max_model_len, 2048) and ignores longer prompts; set it as your engine runs", rel.Name, section)
	}
	return nil
}

// deployment is vLLM's replica of m on r.TP GPUs g with r's engine arguments applied
// (gpumodel.EngineArgs), checked to leave room for a KV cache.
func (r ReplicaConfig) deployment(g gpumodel.GPU, m gpumodel.Model, section string) (gpumodel.Deployment, error) {
	tp := max(r.TP, 1)
	d, err := gpumodel.EngineArgs{
		GPUMemoryUtilization: r.MemoryUtilization, Quantization: r.Quantization, KVCacheDType: r.KVCacheDType,
		MaxNumBatchedTokens: r.MaxNumBatchedTokens, MaxNumSeqs: r.MaxNumSeqs, DisableCustomAllReduce: r.DisableCustomAllReduce,
	}.Deployment(g, m, tp)
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			key, _, _ := strings.Cut(e.Error(), " ")
			errs = append(errs, &KeyError{Key: section + "." + strings.TrimSuffix(key, ":"), Err: fmt.Errorf("%s.%w", section, e)})
		}
		return d, errors.Join(errs...)
	} else if err != nil {
		return d, &KeyError{Key: section, Err: fmt.Errorf("%s: %w", section, err)}
	}
	if err := d.Validate(); err != nil {
		return d, &KeyError{Key: section, Err: fmt.Errorf("%s: %w", section, err)}
	}
	if r.NumBlocks == 0 && d.KVBlocks() <= 0 {
		return d, &KeyError{Key: section, Err: fmt.Errorf("%s: %s on %d× %s leaves no memory for the KV cache", section, m.Name, tp, g.Name)}
	}
	return d, nil
}

// LoadCatalog returns the built-in catalog plus the GPUs and models of the file at path (YAML
// or JSON; gpumodel reads JSON, so YAML is converted first, and the line numbers of a YAML
// file's errors are those of its JSON form: the entry name is what locates them), or the
// built-in one for an empty path. It reads the catalog key of sweep files and of cmd/route's
// config, and cmd/emulate's -catalog.
func LoadCatalog(path string) (gpumodel.Catalog, error) {
	if path == "" {
		return gpumodel.DefaultCatalog(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return gpumodel.Catalog{}, err
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return gpumodel.Catalog{}, fmt.Errorf("%s: %w", path, err)
		}
		if data, err = json.Marshal(v); err != nil {
			return gpumodel.Catalog{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return gpumodel.LoadCatalog(bytes.NewReader(data), path)
}

// ReadFleet returns the fleet section and the catalog path of a sweep file, for commands that
// serve or price the fleet a sweep simulates (cmd/emulate -fleet). The file is decoded as
// Parse decodes it, strictly; it may hold nothing but a fleet section. The fleet must not be
// swept, and the file must have one. name labels errors.
func ReadFleet(data []byte, name string) (FleetConfig, string, error) {
	pts, err := Expand(data, name)
	if err != nil {
		return FleetConfig{}, "", err
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil || top["fleet"] == nil {
		return FleetConfig{}, "", fmt.Errorf("%s: no fleet section", name)
	}
	for _, a := range pts[0].Axes {
		if strings.HasPrefix(a.Path, "fleet.") {
			return FleetConfig{}, "", fmt.Errorf("%s: %s is a sweep axis: want one value, one fleet", name, a.Path)
		}
	}
	return pts[0].Fleet, pts[0].Catalog, nil
}
