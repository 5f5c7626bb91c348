package main

import (
	"flag"
	"fmt"
	"os"

	"kvroute/sweep"
)

// fleetFlags are the flags that describe the replicas with a sweep file's fleet keys. They
// fill a sweep.FleetConfig, which the simulator's own resolver turns into the deployment the
// replicas run, so an emulated fleet is the simulated one.
type fleetFlags struct {
	file    string // -fleet: a sweep file whose fleet and catalog are read
	catalog string // -catalog: a GPU and model catalog file, as a sweep file's catalog
	fleet   sweep.FleetConfig
}

// define registers the fleet flags on fs, with d's values as defaults.
func (f *fleetFlags) define(fs *flag.FlagSet, d sweep.FleetConfig) {
	r := &f.fleet.ReplicaConfig
	f.fleet = d
	fs.StringVar(&f.file, "fleet", "", "sweep file whose fleet section (and catalog) the replicas follow, as cmd/simulate runs them; flags given explicitly override it")
	fs.StringVar(&f.catalog, "catalog", "", "YAML or JSON file of extra GPUs and models, as a sweep file's catalog (overrides the -fleet file's)")
	fs.IntVar(&f.fleet.Replicas, "replicas", d.Replicas, "number of replicas (fleet.replicas)")
	fs.StringVar(&r.GPU, "gpu", d.GPU, "GPU catalog name or alias (fleet.gpu)")
	fs.StringVar(&r.Model, "model", d.Model, "model catalog name or alias (fleet.model)")
	fs.IntVar(&r.TP, "tp", d.TP, "tensor-parallel GPUs per replica (fleet.tp)")
	fs.IntVar(&r.NumBlocks, "num-blocks", 0, "KV cache blocks per replica (fleet.num_blocks; 0: from the GPU and model)")
	fs.Float64Var(&r.MemoryUtilization, "gpu-memory-utilization", 0, "vLLM's --gpu-memory-utilization (fleet.gpu_memory_utilization; 0: 0.9)")
	fs.StringVar(&r.Quantization, "quantization", "", "vLLM's --quantization: fp8 or none (fleet.quantization; empty: the model's own)")
	fs.StringVar(&r.KVCacheDType, "kv-cache-dtype", "", "vLLM's --kv-cache-dtype: auto or fp8 (fleet.kv_cache_dtype)")
	fs.IntVar(&r.MaxNumBatchedTokens, "max-num-batched-tokens", 0, "tokens per step (fleet.max_num_batched_tokens; 0: vLLM's default for the GPU)")
	fs.IntVar(&r.MaxNumSeqs, "max-num-seqs", 0, "requests running at once (fleet.max_num_seqs; 0: vLLM's default for the GPU)")
	fs.StringVar(&r.VLLM, "vllm", "", "vLLM release whose engine semantics to follow (fleet.vllm): v0.33 or v0.8-v0.10 (empty: the newest; V0 is cmd/simulate's only)")
	fs.Float64Var(&r.KVOffloadingSize, "kv-offloading-size", 0, "vLLM's --kv-offloading-size: GiB of CPU KV tier per replica (fleet.kv_offloading_size; 0: none)")
	fs.IntVar(&r.KVOffloadingBlockSize, "kv-offloading-block-size", 0, "the CPU tier's block size in tokens (fleet.kv_offloading_block_size; 0: the GPU's)")
}

// resolve reads the -fleet file when given, lays the flags given explicitly over it, and
// resolves the result with the simulator's resolver into o's replica configuration.
func (f *fleetFlags) resolve(fs *flag.FlagSet, o *options) error {
	fl, catalog := f.fleet, f.catalog
	if f.file != "" {
		data, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("-fleet: %w", err)
		}
		if fl, catalog, err = sweep.ReadFleet(data, f.file); err != nil {
			return fmt.Errorf("-fleet: %w", err)
		}
		given := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
		fl = overlay(fl, f.fleet, given)
		if given["catalog"] {
			catalog = f.catalog
		}
	}
	cat, err := sweep.LoadCatalog(catalog)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if fl.Disaggregated() {
		return o.resolvePools(fs, fl, cat)
	}
	if fl.Replicas < 1 {
		return fmt.Errorf("-replicas must be at least 1, got %d", fl.Replicas)
	}
	ec, err := fl.ReplicaConfig.Engine(cat, "fleet")
	if err != nil {
		return err
	}
	o.replicas = fl.Replicas
	r := fl.ReplicaConfig
	o.cfg.GPU, o.cfg.Model, o.cfg.TP, o.cfg.NumBlocks, o.cfg.VLLM = r.GPU, r.Model, max(r.TP, 1), r.NumBlocks, r.VLLM
	o.cfg.MaxNumBatchedTokens, o.cfg.MaxNumSeqs = ec.Deployment.MaxNumBatchedTokens, ec.Deployment.MaxNumSeqs
	o.cfg.Deployment = &ec.Deployment
	o.cfg.Offload = ec.Offload
	return nil
}

// overlay returns file with the values of the flags given explicitly taken from flags.
func overlay(file, flags sweep.FleetConfig, given map[string]bool) sweep.FleetConfig {
	f, r, g := &file.ReplicaConfig, &flags.ReplicaConfig, given
	set := func(name string, apply func()) {
		if g[name] {
			apply()
		}
	}
	set("replicas", func() { file.Replicas = flags.Replicas })
	set("gpu", func() { f.GPU = r.GPU })
	set("model", func() { f.Model = r.Model })
	set("tp", func() { f.TP = r.TP })
	set("num-blocks", func() { f.NumBlocks = r.NumBlocks })
	set("gpu-memory-utilization", func() { f.MemoryUtilization = r.MemoryUtilization })
	set("quantization", func() { f.Quantization = r.Quantization })
	set("kv-cache-dtype", func() { f.KVCacheDType = r.KVCacheDType })
	set("max-num-batched-tokens", func() { f.MaxNumBatchedTokens = r.MaxNumBatchedTokens })
	set("max-num-seqs", func() { f.MaxNumSeqs = r.MaxNumSeqs })
	set("vllm", func() { f.VLLM = r.VLLM })
	set("kv-offloading-size", func() { f.KVOffloadingSize = r.KVOffloadingSize })
	set("kv-offloading-block-size", func() { f.KVOffloadingBlockSize = r.KVOffloadingBlockSize })
	return file
}
