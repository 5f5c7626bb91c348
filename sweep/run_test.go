package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvroute/gpumodel"
)

const base = `name: t
seed: 3
requests: 50
fleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}
workload: {kind: shared-prefix, groups: 4, prompts_per_group: 4, system_prompt_tokens: 256, question_tokens: 16, output_tokens: 8}
arrival: {process: poisson, rate: 10}
router: {metrics_interval: 50ms}
policies: [round-robin, {name: prefix-cache, block_size: 64}]
`

func TestParseSweepsListsAsCartesianProduct(t *testing.T) {
	src := strings.Replace(base, "rate: 10", "rate: [10, 20, 40]", 1)
	src = strings.Replace(src, "replicas: 2", "replicas: [2, 4]", 1)
	points, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, p := range points {
		labels = append(labels, p.Label())
	}
	want := "replicas=2,rate=10 replicas=2,rate=20 replicas=2,rate=40 replicas=4,rate=10 replicas=4,rate=20 replicas=4,rate=40"
	if got := strings.Join(labels, " "); got != want {
		t.Fatalf("points %q, want %q", got, want)
	}
	if points[4].Fleet.Replicas != 4 || points[4].Arrival.Rate != 20 {
		t.Fatalf("point 4: %+v %+v", points[4].Fleet, points[4].Arrival)
	}
	jobs := Plan(points)
	if len(jobs) != 12 || jobs[1].Name != "prefix-cache,block_size=64/replicas=2,rate=10" {
		t.Fatalf("%d jobs, second %q", len(jobs), jobs[1].Name)
	}
}

// TestConfigErrors has one case per kind of mistake; each error must name the file and the field.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, from, to, want string
	}{
		{"unknown top-level field", "seed: 3", "seed: 3\nsede: 4", "field sede not found"},
		{"unknown nested field", "tp: 1", "tp: 1, gpus: 2", "field gpus not found"},
		{"wrong type", "replicas: 2", "replicas: two", "cannot unmarshal"},
		{"unknown gpu", "H100-SXM-80GB", "H900", "fleet.gpu"},
		{"unknown model", "model: llama-3.1-8b", "model: llama-9", "fleet.model"},
		{"no replicas", "replicas: 2", "replicas: 0", "fleet.replicas 0"},
		{"unknown policy", "round-robin,", "round-robbin,", "policies[0]"},
		{"bad policy param", "block_size: 64", "block_sise: 64", `unknown field "block_sise"`},
		{"invalid policy value", "block_size: 64", "block_size: -1", "block_size -1"},
		{"bad workload kind", "kind: shared-prefix", "kind: shared-prefixes", "shared-prefixes"},
		{"negative rate", "rate: 10", "rate: -1", "rate"},
		{"no cap", "requests: 50\n", "", "requests or duration"},
		{"bad duration", "metrics_interval: 50ms", "metrics_interval: fast", "metrics_interval"},
		{"not yaml", "name: t", "name: [t", "t.yaml"},
		{"unknown vllm release", "tp: 1}", "tp: 1, vllm: v0.5}", "line 4: fleet.vllm: unknown vLLM release \"v0.5\""},
		{"scheduler steps on V1", "tp: 1}", "tp: 1, num_scheduler_steps: 10}", "line 4: fleet.num_scheduler_steps 10"},
		{"V0 without a token budget", "tp: 1}", "tp: 1, vllm: v0.6}", "line 4: fleet.vllm v0.6 needs fleet.max_num_batched_tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.from, tc.to, 1)
			if src == base {
				t.Fatalf("replacement %q not found", tc.from)
			}
			_, err := Parse([]byte(src), "t.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "t.yaml") {
				t.Fatalf("error %q: want it to mention %q and the file name", msg, tc.want)
			}
		})
	}
}

// TestExamplesParse keeps every sweep file in examples/ valid, run from the repository root
// as their comments say (the files they name are relative to it).
func TestExamplesParse(t *testing.T) {
	t.Chdir("..")
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	published, _ := filepath.Glob(filepath.Join("examples", "published", "*.yaml"))
	files = append(files, published...)
	if err != nil || len(published) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(data, f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// TestUserCatalog runs a fleet of a GPU and a model the built-in catalog lacks, declared in a
// YAML catalog file named by the sweep file; a broken catalog names its file and entry.
func TestUserCatalog(t *testing.T) {
	dir := t.TempDir()
	cat := filepath.Join(dir, "gpus.yaml")
	if err := os.WriteFile(cat, []byte(`gpus:
  - {name: H100-tuned, base: H100-SXM-80GB, efficiency: {prefill_mfu: 0.6}}
models:
  - {name: Qwen2.5-7B-FP8, base: Qwen2.5-7B, quantization: fp8}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(base, "seed: 3", "seed: 3\ncatalog: "+cat, 1)
	src = strings.Replace(src, "gpu: H100-SXM-80GB, model: llama-3.1-8b", "gpu: h100-tuned, model: qwen2.5-7b-fp8", 1)
	points, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reps, err := points[0].fleet()
	if err != nil {
		t.Fatal(err)
	}
	d := reps[0].Deployment
	if d.GPU.Efficiency.PrefillMFU != 0.6 || d.Quantization != gpumodel.QuantFP8 || d.KVDTypeBytes != 2 {
		t.Fatalf("fleet built from %s / %s, MFU %v, quantization %q, KV dtype %d bytes",
			d.GPU.Name, d.Model.Name, d.GPU.Efficiency.PrefillMFU, d.Quantization, d.KVDTypeBytes)
	}
	if err := os.WriteFile(cat, []byte("gpus:\n  - {name: Broken, peak_tflops: -1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(src), "t.yaml"); err == nil || !strings.Contains(err.Error(), cat) || !strings.Contains(err.Error(), "Broken") {
		t.Fatalf("broken catalog: %v", err)
	}
}

// TestFleetEngineArgs checks that the fleet's vLLM arguments reach the deployment, and that a
// bad one is an error naming its field.
func TestFleetEngineArgs(t *testing.T) {
	fleet := "fleet: {replicas: 2, gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}"
	tests := []struct {
		name    string
		args    string
		check   func(d gpumodel.Deployment) bool
		wantErr string
	}{
		{"defaults", "", func(d gpumodel.Deployment) bool {
			return d.Quantization == gpumodel.QuantNone && d.KVDTypeBytes == 2 && d.MaxNumBatchedTokens == 8192
		}, ""},
		{"fp8 weights and cache", ", quantization: fp8, kv_cache_dtype: fp8", func(d gpumodel.Deployment) bool {
			return d.Quantization == gpumodel.QuantFP8 && d.KVDTypeBytes == 1
		}, ""},
		{"batch limits move the activation reserve", ", max_num_batched_tokens: 16384, max_num_seqs: 256", func(d gpumodel.Deployment) bool {
			return d.MaxNumBatchedTokens == 16384 && d.MaxNumSeqs == 256 &&
				d.ActivationReserveBytes == gpumodel.EstimateActivationReserve(d.Model, 1, 16384, 256)
		}, ""},
		{"bad quantization", ", quantization: int3", nil, "fleet.quantization"},
		{"bad kv dtype", ", kv_cache_dtype: fp4", nil, "fleet.kv_cache_dtype"},
		{"negative batch", ", max_num_batched_tokens: -1", nil, "max_num_batched_tokens"},
		{"vllm release", ", vllm: v0.8-v0.10", nil, ""},
		{"vllm V0, multi-step", ", vllm: v0.6, num_scheduler_steps: 10, max_num_batched_tokens: 4096", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, fleet, strings.TrimSuffix(fleet, "}")+tc.args+"}", 1)
			points, err := Parse([]byte(src), "t.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			reps, err := points[0].fleet()
			if err != nil {
				t.Fatal(err)
			}
			if want := "v0.33"; strings.Contains(tc.args, "vllm:") {
				want, steps := "v0.8-v0.10", 0
				if strings.Contains(tc.args, "v0.6") {
					want, steps = "v0.6", 10
				}
				if reps[0].Release.Name != want || reps[0].SchedulerSteps != steps {
					t.Fatalf("release %q, %d scheduler steps; want %q, %d", reps[0].Release.Name,
						reps[0].SchedulerSteps, want, steps)
				}
				return
			} else if reps[0].Release.Name != want {
				t.Fatalf("default release %q, want the newest %q", reps[0].Release.Name, want)
			}
			if d := reps[0].Deployment; !tc.check(d) {
				t.Errorf("deployment %+v does not carry %q", d, tc.args)
			}
		})
	}
}

// TestMaxRetries checks that router.max_retries means what it means in cmd/route: absent is
// 2, and 0 is no retry.
func TestMaxRetries(t *testing.T) {
	for _, tc := range []struct {
		router string
		want   int
	}{{"router: {metrics_interval: 50ms}", 2}, {"router: {metrics_interval: 50ms, max_retries: 0}", 0}, {"router: {metrics_interval: 50ms, max_retries: 5}", 5}} {
		points, err := Parse([]byte(strings.Replace(base, "router: {metrics_interval: 50ms}", tc.router, 1)), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		c, err := points[0].clusterConfig()
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxRetries != tc.want {
			t.Errorf("%s: %d retries, want %d", tc.router, c.MaxRetries, tc.want)
		}
	}
}
