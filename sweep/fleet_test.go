package sweep

import (
	"errors"
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
			if got != tc.want {
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
