package gpumodel

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kernelFile is one run of testdata/gpu_steps.py: GPU times of a model-shaped network's
// kernels on one GPU, replayed from CUDA graphs.
type kernelFile struct {
	Device      string        `json:"device"`
	SMs         int           `json:"sms"`
	MemoryGiB   float64       `json:"memory_gib"`
	Torch       string        `json:"torch"`
	CUDA        string        `json:"cuda"`
	Cublas      string        `json:"cublas"`
	SDPABackend string        `json:"sdpa_backend"`
	Model       string        `json:"model"`
	Weights     string        `json:"weights"`
	Points      []kernelPoint `json:"points"`
}

type kernelPoint struct {
	Kind    string  `json:"kind"` // layer_linear | step | attention_decode | attention_prefill
	Tokens  int     `json:"tokens"`
	Prefill []Chunk `json:"prefill"`
	Decode  *struct {
		Seqs    int `json:"seqs"`
		Context int `json:"context"`
	} `json:"decode"`
	// Attention-only shapes, which gpumodel does not price apart (docs/fidelity.md uses them).
	Seqs    int     `json:"seqs"`
	Context int     `json:"context"`
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	MS      float64 `json:"ms"`
	MinMS   float64 `json:"min_ms"`
	MaxMS   float64 `json:"max_ms"`
	Replays int     `json:"replays"`
	Graph   bool    `json:"graph"`
}

// kernelGPUs names the catalog GPU of each device name PyTorch reports.
var kernelGPUs = map[string]string{
	"NVIDIA H100 80GB HBM3": "H100-SXM-80GB",
	"NVIDIA H200":           "H200-SXM-141GB",
}

// memoryBoundRows is the most rows a layer's matrix multiplies take before their math,
// rather than the weight stream, sets their time on an H100 or H200 (about 300 rows at
// the ridge; 64 is well below it).
const memoryBoundRows = 64

func loadKernels(t *testing.T, path string) kernelFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f kernelFile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// kernelPoints turns f's priced points into calibration points and returns, apart, the
// layer_linear points whose math bounds them (more than memoryBoundRows rows).
func kernelPoints(t *testing.T, path string, f kernelFile) (checked, computeBound []calibrationPoint) {
	t.Helper()
	gpu, ok := kernelGPUs[f.Device]
	if !ok {
		t.Fatalf("%s: device %q is not in kernelGPUs", path, f.Device)
	}
	for _, k := range f.Points {
		p := calibrationPoint{Kind: k.Kind, GPU: gpu, Model: f.Model, TP: 1, Prefill: k.Prefill,
			Tokens: k.Tokens, Measured: k.MS, Unit: "ms"}
		if !k.Graph || !(k.MS > 0) {
			t.Fatalf("%s: %s point not timed from a CUDA graph or not positive: %+v", path, k.Kind, k)
		}
		switch k.Kind {
		case "attention_decode", "attention_prefill":
			continue
		case "layer_linear":
			p.Name = fmt.Sprintf("linear/layer %d tok", k.Tokens)
			if k.Tokens > memoryBoundRows {
				computeBound = append(computeBound, p)
				continue
			}
		case "step":
			p.Name = kernelStepName(k)
			if k.Decode != nil {
				p.Decode.Seqs, p.Decode.Context = k.Decode.Seqs, k.Decode.Context
			}
		default:
			t.Fatalf("%s: unknown kind %q", path, k.Kind)
		}
		checked = append(checked, p)
	}
	return checked, computeBound
}

func kernelStepName(k kernelPoint) string {
	var parts []string
	if k.Decode != nil {
		parts = append(parts, fmt.Sprintf("decode %d@%d", k.Decode.Seqs, k.Decode.Context))
	}
	for _, c := range k.Prefill {
		parts = append(parts, fmt.Sprintf("prefill %d", c.Tokens))
	}
	return strings.Join(parts, " + ")
}

// TestKernelMeasurements prices the shapes that testdata/gpu_steps.py timed on an H100
// and an H200 (testdata/kernels_*.json) and holds gpumodel to them:
//   - whole steps, and layers small enough to be bound by their weight stream, within the
//     calibration bar (±25% each, 12% mean absolute error per file). A step's price
//     includes its overheads: the measured graph runs about a dozen small kernels per
//     layer (norms, adds, copies, the activation) whose latency stands in for them.
//   - a layer's matrix multiplies over more rows never priced faster than cuBLAS ran
//     them: PrefillMFU is an effective figure below cuBLAS's own efficiency (it also
//     carries attention and the work between kernels; see README.md), never above it.
func TestKernelMeasurements(t *testing.T) {
	paths, err := filepath.Glob("testdata/kernels_*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 3 {
		t.Fatalf("found %d kernel files, want the 3 of README.md", len(paths))
	}
	var all strings.Builder
	for _, path := range paths {
		f := loadKernels(t, path)
		checked, computeBound := kernelPoints(t, path, f)
		table, errs := calibrationTable(t, checked)
		bound, boundErrs := calibrationTable(t, computeBound)
		fmt.Fprintf(&all, "%s on %s (%s), held to the bar:\n%s", f.Model, f.Device, filepath.Base(path), table)
		fmt.Fprintf(&all, "bound by their math, never priced below cuBLAS:\n%s\n", bound)
		var sum float64
		for i, e := range errs {
			sum += math.Abs(e)
			if math.Abs(e) > maxPointError {
				t.Errorf("%s: %s: predicted is %+.1f%% off the measured %.3f ms (tolerance ±%.0f%%)",
					path, checked[i].Name, 100*e, checked[i].Measured, 100*maxPointError)
			}
		}
		if mae := sum / float64(len(errs)); mae > maxMeanError {
			t.Errorf("%s: mean absolute error %.1f%% exceeds %.0f%%", path, 100*mae, 100*maxMeanError)
		}
		for i, e := range boundErrs {
			if e < 0 {
				t.Errorf("%s: %s priced %.1f%% faster than cuBLAS's %.3f ms", path, computeBound[i].Name, -100*e, computeBound[i].Measured)
			}
		}
	}
	t.Log("\n" + all.String())
	checkReadme(t, "kernel", "TestKernelMeasurements", all.String())
}
