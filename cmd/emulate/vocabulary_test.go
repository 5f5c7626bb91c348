package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/sweep"
)

// TestVocabularySweepAndEmulate decodes the shared vocabulary's fragments as a sweep file,
// serves that file's fleet with -fleet, and checks the emulator runs the simulator's
// replicas: the same count, deployment, KV blocks and release. cmd/route's vocabulary test
// does the same for the router.
func TestVocabularySweepAndEmulate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "sweep", "testdata", "vocabulary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(k, "#") {
			f[k] = v
		}
	}
	src := "name: vocabulary\nseed: " + f["seed"] + "\nfleet: {replicas: " + f["replicas"] + ", " + strings.TrimPrefix(f["replica"], "{") +
		"\nrouter: {metrics_interval: " + f["metrics_interval"] + "}\npolicies: [" + f["policy"] + "]\n"
	path := filepath.Join(t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-fleet", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	points, err := sweep.Expand([]byte(src), "sweep.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := points[0].Fleet.Engines(gpumodel.DefaultCatalog(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if o.replicas != len(sim) || o.cfg.NumBlocks != sim[0].NumBlocks || o.cfg.VLLM != points[0].Fleet.VLLM || o.cfg.Model != points[0].Fleet.Model {
		t.Errorf("emulating %d replicas of %s, %d blocks, vllm %q; simulated %d, %s, %d, %q",
			o.replicas, o.cfg.Model, o.cfg.NumBlocks, o.cfg.VLLM, len(sim), points[0].Fleet.Model, sim[0].NumBlocks, points[0].Fleet.VLLM)
	}
	if o.cfg.Deployment == nil {
		t.Fatal("no deployment resolved")
	}
	if diff := cmp.Diff(sim[0].Deployment, *o.cfg.Deployment); diff != "" {
		t.Errorf("deployment (-simulated +emulated):\n%s", diff)
	}
}

func TestFleetFlags(t *testing.T) {
	dir := t.TempDir()
	fleet := filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(fleet, []byte("fleet: {replicas: 3, gpu: L4, model: llama-3.1-8b, gpu_memory_utilization: 0.8, max_num_seqs: 64}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	swept := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(swept, []byte("fleet: {replicas: [1, 2], gpu: L4, model: llama-3.1-8b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, o options)
		wantErr string
	}{
		{"the file", []string{"-fleet", fleet}, func(t *testing.T, o options) {
			d := o.cfg.Deployment
			if o.replicas != 3 || d.GPU.Name != "L4" || d.MemoryUtilization != 0.8 || d.MaxNumSeqs != 64 {
				t.Errorf("%d replicas of %+v", o.replicas, d)
			}
		}, ""},
		{"flags over the file", []string{"-fleet", fleet, "-replicas", "2", "-gpu", "H100-SXM-80GB", "-kv-cache-dtype", "fp8"}, func(t *testing.T, o options) {
			d := o.cfg.Deployment
			if o.replicas != 2 || d.GPU.Name != "H100-SXM-80GB" || d.KVDTypeBytes != 1 || d.MemoryUtilization != 0.8 {
				t.Errorf("%d replicas of %+v", o.replicas, d)
			}
		}, ""},
		{"engine args without a file", []string{"-quantization", "fp8", "-gpu-memory-utilization", "0.5"}, func(t *testing.T, o options) {
			if d := o.cfg.Deployment; d.MemoryUtilization != 0.5 || d.Quantization != gpumodel.QuantFP8 {
				t.Errorf("deployment %+v", d)
			}
		}, ""},
		{"the deprecated admin flag", []string{"-admin-addr", "127.0.0.1:0"}, func(t *testing.T, o options) {
			if o.admin != "127.0.0.1:0" || len(o.deprecated) != 1 {
				t.Errorf("admin %q, warnings %q", o.admin, o.deprecated)
			}
		}, ""},
		{"both admin flags", []string{"-admin-addr", "127.0.0.1:0", "-admin-listen", "127.0.0.1:1"}, nil, "give -admin-listen only"},
		{"a swept fleet", []string{"-fleet", swept}, nil, "fleet.replicas is a sweep axis"},
		{"no such file", []string{"-fleet", filepath.Join(dir, "none.yaml")}, nil, "-fleet"},
		{"bad memory fraction", []string{"-gpu-memory-utilization", "1.5"}, nil, "fleet.gpu_memory_utilization"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}
