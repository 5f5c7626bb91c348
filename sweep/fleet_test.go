package sweep

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"kvroute/gpumodel"
)

func TestReplicaEngineErrorsNameTheKey(t *testing.T) {
	ok := ReplicaConfig{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b"}
	tests := []struct {
		name   string
		mutate func(*ReplicaConfig)
		want   string // the KeyError's key; empty: valid
	}{
		{"defaults", func(*ReplicaConfig) {}, ""},
		{"unknown gpu", func(r *ReplicaConfig) { r.GPU = "TPU" }, "hardware.a.gpu"},
		{"unknown model", func(r *ReplicaConfig) { r.Model = "gpt-9" }, "hardware.a.model"},
		{"negative tp", func(r *ReplicaConfig) { r.TP = -2 }, "hardware.a.tp"},
		{"memory above 1", func(r *ReplicaConfig) { r.MemoryUtilization = 1.5 }, "hardware.a.gpu_memory_utilization"},
		{"bad quantization", func(r *ReplicaConfig) { r.Quantization = "int3" }, "hardware.a.quantization"},
		{"bad kv dtype", func(r *ReplicaConfig) { r.KVCacheDType = "fp4" }, "hardware.a.kv_cache_dtype"},
		{"unknown release", func(r *ReplicaConfig) { r.VLLM = "v0.5" }, "hardware.a.vllm"},
		{"V0 steps on V1", func(r *ReplicaConfig) { r.NumSchedulerSteps = 8 }, "hardware.a.num_scheduler_steps"},
		{"V0 without a token budget", func(r *ReplicaConfig) { r.VLLM = "v0.6" }, "hardware.a.vllm"},
		{"CPU tier", func(r *ReplicaConfig) { r.KVOffloadingSize, r.KVOffloadingBlockSize = 64, 32 }, ""},
		{"negative CPU tier", func(r *ReplicaConfig) { r.KVOffloadingSize = -1 }, "hardware.a.kv_offloading_size"},
		{"CPU block size not a multiple", func(r *ReplicaConfig) { r.KVOffloadingSize, r.KVOffloadingBlockSize = 64, 24 }, "hardware.a.kv_offloading_size"},
		{"CPU block size without a tier", func(r *ReplicaConfig) { r.KVOffloadingBlockSize = 32 }, "hardware.a.kv_offloading_size"},
		{"CPU tier on V0", func(r *ReplicaConfig) {
			r.KVOffloadingSize, r.VLLM, r.MaxNumBatchedTokens = 64, "v0.6", 4096
		}, "hardware.a.kv_offloading_size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.mutate(&r)
			_, err := r.Engine(gpumodel.DefaultCatalog(), "hardware.a")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tc.want || !strings.HasPrefix(ke.Error(), tc.want) {
				t.Fatalf("err = %v (key %v), want a KeyError for %s", err, ke, tc.want)
			}
		})
	}
}

// TestEngineAppliesTheEngineArgs checks that the vLLM arguments reach the deployment.
func TestEngineAppliesTheEngineArgs(t *testing.T) {
	r := ReplicaConfig{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b", TP: 2, MemoryUtilization: 0.8,
		KVCacheDType: "fp8", MaxNumBatchedTokens: 4096, MaxNumSeqs: 64, NumBlocks: 100}
	ec, err := r.Engine(gpumodel.DefaultCatalog(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	d := ec.Deployment
	if d.TP != 2 || d.MemoryUtilization != 0.8 || d.KVDTypeBytes != 1 || d.MaxNumBatchedTokens != 4096 || d.MaxNumSeqs != 64 || ec.NumBlocks != 100 {
		t.Errorf("deployment %+v, num_blocks %d", d, ec.NumBlocks)
	}
}

func TestReadFleet(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		want              FleetConfig
	}{
		{"fleet only", "fleet: {replicas: 3, gpu: L4, model: llama-3.1-8b, vllm: v0.33}\n", "",
			FleetConfig{Replicas: 3, ReplicaConfig: ReplicaConfig{GPU: "L4", Model: "llama-3.1-8b", VLLM: "v0.33"}}},
		{"a whole sweep file", file, "fleet.replicas is a sweep axis", FleetConfig{}},
		{"rate swept, fleet not", strings.Replace(file, "replicas: [2, 4]", "replicas: 2", 1), "",
			FleetConfig{Replicas: 2, ReplicaConfig: ReplicaConfig{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b", TP: 1}}},
		{"no fleet", "name: x\n", "no fleet section", FleetConfig{}},
		{"unknown key", "fleet: {replicas: 1, gpus: 2}\n", "gpus", FleetConfig{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := ReadFleet([]byte(tc.in), "f.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "f.yaml") {
					t.Fatalf("err = %v, want one naming f.yaml and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzReadFleet checks that any bytes are read or refused without a panic, and that a fleet
// read is one Engines can judge without a panic either.
func FuzzReadFleet(f *testing.F) {
	f.Add([]byte("fleet: {replicas: 2, gpu: L4, model: llama-3.1-8b}\n"))
	f.Add([]byte(file))
	f.Add([]byte("fleet: {replicas: 1, gpu: H100, model: llama-3.1-8b, gpu_memory_utilization: .nan, vllm: v0.6}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, _, err := ReadFleet(data, "f.yaml")
		if err != nil {
			return
		}
		if fl.Replicas > MaxFleetReplicas {
			return // building thousands of configurations would only slow the fuzzer
		}
		_, _ = fl.Engines(gpumodel.DefaultCatalog(), "fleet")
	})
}

// TestEngineAppliesTheOffloadArgs checks that the CPU tier's keys reach the engine, in
// vLLM's units and defaults.
func TestEngineAppliesTheOffloadArgs(t *testing.T) {
	no := false
	r := ReplicaConfig{GPU: "H100-SXM-80GB", Model: "llama-3.1-8b", KVOffloadingSize: 1.5,
		KVOffloadingBlockSize: 64, KVOffloadingPromptOnly: &no}
	ec, err := r.Engine(gpumodel.DefaultCatalog(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if o := ec.Offload; o.Bytes != 3<<29 || o.BlockSize != 64 || !o.Decode {
		t.Errorf("offload %+v: want 1.5 GiB, 64-token blocks, decode blocks too", o)
	}
	r.KVOffloadingPromptOnly = nil
	if ec, _ := r.Engine(gpumodel.DefaultCatalog(), "fleet"); ec.Offload.Decode {
		t.Error("decode blocks offloaded by default, want prompt blocks only")
	}
}

// TestOffloadSizeIsAnAxis checks that a list of CPU tier sizes sweeps the fleet with and
// without a tier.
func TestOffloadSizeIsAnAxis(t *testing.T) {
	pts, err := Parse([]byte("name: x\nrequests: 10\nfleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b, kv_offloading_size: [0, 64]}\n"+
		"workload: {kind: shared-prefix}\narrival: {rate: 1}\npolicies: [round-robin]\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, p := range pts {
		if len(p.Axes) != 1 || p.Axes[0].Path != "fleet.kv_offloading_size" {
			t.Fatalf("axes %v, want fleet.kv_offloading_size", p.Axes)
		}
		got = append(got, p.Fleet.KVOffloadingSize)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 64 {
		t.Errorf("sizes %v, want [0 64]", got)
	}
}
