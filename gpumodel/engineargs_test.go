package gpumodel

import (
	"reflect"
	"strings"
	"testing"
)

func TestEngineArgs(t *testing.T) {
	g, m := H100SXM80GB(), Llama31x8B()
	base := DefaultDeployment(g, m, 1)
	tests := []struct {
		name    string
		args    EngineArgs
		check   func(Deployment) bool
		wantErr string
	}{
		{"defaults", EngineArgs{}, func(d Deployment) bool { return reflect.DeepEqual(d, base) }, ""},
		{"fp8 cache holds twice the tokens", EngineArgs{KVCacheDType: "fp8"},
			func(d Deployment) bool {
				return d.KVDTypeBytes == 1 && d.KVCapacityTokens() > base.KVCapacityTokens()*19/10
			}, ""},
		{"smaller budget, smaller activation reserve", EngineArgs{MaxNumBatchedTokens: 2048, MaxNumSeqs: 64},
			func(d Deployment) bool {
				return d.MaxNumBatchedTokens == 2048 && d.MaxNumSeqs == 64 && d.ActivationReserveBytes < base.ActivationReserveBytes
			}, ""},
		{"utilization", EngineArgs{GPUMemoryUtilization: 0.5},
			func(d Deployment) bool { return d.KVCapacityTokens() < base.KVCapacityTokens()/2 }, ""},
		{"bad quantization", EngineArgs{Quantization: "int3"}, nil, "quantization"},
		{"bad kv dtype", EngineArgs{KVCacheDType: "fp4"}, nil, `kv_cache_dtype "fp4"`},
		{"negative budget", EngineArgs{MaxNumSeqs: -1}, nil, "max_num_seqs (-1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.args.Deployment(g, m, 1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(d) {
				t.Fatalf("%+v, %v", d, err)
			}
		})
	}
}
