package gpumodel

import (
	"errors"
	"math"
	"testing"
)

func TestLookupGPU(t *testing.T) {
	tests := []struct {
		name    string
		lookup  string
		want    string
		wantErr error
	}{
		{"canonical A100-40", "A100-40GB-SXM", "A100-40GB-SXM", nil},
		{"canonical A100-80", "A100-80GB-SXM", "A100-80GB-SXM", nil},
		{"canonical H100", "H100-SXM-80GB", "H100-SXM-80GB", nil},
		{"canonical H200", "H200-SXM-141GB", "H200-SXM-141GB", nil},
		{"canonical H100 PCIe", "H100-PCIe-80GB", "H100-PCIe-80GB", nil},
		{"plain h100 is the SXM part", "h100", "H100-SXM-80GB", nil},
		{"PCIe alias", "h100-pcie", "H100-PCIe-80GB", nil},
		{"canonical L40S", "L40S", "L40S", nil},
		{"canonical L4", "L4", "L4", nil},
		{"lower case", "h100-sxm-80gb", "H100-SXM-80GB", nil},
		{"alias", "h100", "H100-SXM-80GB", nil},
		{"alias upper case", "A100-80GB", "A100-80GB-SXM", nil},
		{"underscores and spaces", "  a100_40gb ", "A100-40GB-SXM", nil},
		{"plain a100 is the 80 GB part", "a100", "A100-80GB-SXM", nil},
		{"unknown", "B200", "", ErrUnknownGPU},
		{"empty", "", "", ErrUnknownGPU},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LookupGPU(tc.lookup)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("LookupGPU(%q) error = %v, want %v", tc.lookup, err, tc.wantErr)
			}
			if got.Name != tc.want {
				t.Errorf("LookupGPU(%q) = %q, want %q", tc.lookup, got.Name, tc.want)
			}
		})
	}
}

func TestLookupModel(t *testing.T) {
	tests := []struct {
		name    string
		lookup  string
		want    string
		wantErr error
	}{
		{"Llama-3.1-8B", "Llama-3.1-8B", "Llama-3.1-8B", nil},
		{"lower case", "llama-3.1-8b", "Llama-3.1-8B", nil},
		{"hugging face id", "meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B", nil},
		{"Llama-3-8B shares the shapes", "meta-llama/Meta-Llama-3-8B", "Llama-3.1-8B", nil},
		{"Llama-3.1-70B", "llama-3.1-70b", "Llama-3.1-70B", nil},
		{"Qwen2.5-7B", "qwen2.5-7b", "Qwen2.5-7B", nil},
		{"Mistral-7B", "MISTRAL-7B", "Mistral-7B", nil},
		{"Llama-2-7B", "meta-llama/Llama-2-7b-hf", "Llama-2-7B", nil},
		{"Llama-2-13B", "meta-llama/Llama-2-13b-hf", "Llama-2-13B", nil},
		{"Llama-2-70B", "llama-2-70b", "Llama-2-70B", nil},
		{"Qwen3-14B", "Qwen/Qwen3-14B", "Qwen3-14B", nil},
		{"Qwen3-32B", "Qwen/Qwen3-32B", "Qwen3-32B", nil},
		{"gpt-oss-120b", "openai/gpt-oss-120b", "gpt-oss-120b", nil},
		{"gpt-oss-20b", "GPT-OSS-20B", "gpt-oss-20b", nil},
		{"unknown", "gpt-4", "", ErrUnknownModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LookupModel(tc.lookup)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("LookupModel(%q) error = %v, want %v", tc.lookup, err, tc.wantErr)
			}
			if got.Name != tc.want {
				t.Errorf("LookupModel(%q) = %q, want %q", tc.lookup, got.Name, tc.want)
			}
		})
	}
}

func TestBuiltinsValidate(t *testing.T) {
	c := DefaultCatalog()
	for _, g := range c.GPUs() {
		if err := g.Validate(); err != nil {
			t.Errorf("%s: %v", g.Name, err)
		}
	}
	for _, m := range c.Models() {
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
}

// TestModelShapes checks each preset's parameter count against its shapes
// (norms and biases are the only difference) and its KV bytes per token and
// BF16 weight size against values computed from each model's config.json.
func TestModelShapes(t *testing.T) {
	tests := []struct {
		model      Model
		kvPerToken int64
		weightsGB  float64 // BF16, decimal GB; 0 when the reference has none
	}{
		{Llama31x8B(), 131_072, 16.1},
		{Llama31x70B(), 327_680, 141},
		{Qwen25x7B(), 57_344, 15.2},
		{Mistral7B(), 131_072, 14.5},
		{Llama2x7B(), 524_288, 13.5},
		{Llama2x13B(), 819_200, 26.0},
		{Llama2x70B(), 327_680, 0},
		{Qwen3x14B(), 163_840, 0},
		{Qwen3x32B(), 262_144, 0},
		// gpt-oss: 18 (12) full-attention layers × 2 × 8 KV heads × 64 × 2 bytes; the
		// checkpoints' 60.8 and 12.8 GiB (model card) in GB.
		{GptOss120B(), 36_864, 65.3},
		{GptOss20B(), 24_576, 13.7},
	}
	for _, tc := range tests {
		t.Run(tc.model.Name, func(t *testing.T) {
			m := tc.model
			if got, want := float64(m.Params), float64(m.ShapeParams()); math.Abs(got/want-1) > 0.001 {
				t.Errorf("params %v differ from the shapes' %v by more than 0.1%%", got, want)
			}
			if got := m.KVBytesPerToken(); got != tc.kvPerToken {
				t.Errorf("KVBytesPerToken = %d, want %d", got, tc.kvPerToken)
			}
			if tc.weightsGB > 0 {
				if got := float64(m.WeightBytes()) / 1e9; math.Abs(got/tc.weightsGB-1) > 0.01 {
					t.Errorf("weights %.2f GB, want %.1f GB ±1%%", got, tc.weightsGB)
				}
			}
		})
	}
}

func TestCatalogAdd(t *testing.T) {
	mine := H100SXM80GB()
	mine.Name, mine.Aliases = "H100-NVL", []string{"h100nvl"}
	taken := H100SXM80GB()
	taken.Name, taken.Aliases = "Other", []string{"H100"}
	bad := mine
	bad.Name, bad.Aliases, bad.PeakFLOPS = "Broken", nil, math.NaN()
	tests := []struct {
		name    string
		gpu     GPU
		wantErr error
	}{
		{"new name", mine, nil},
		{"alias collides with a built-in alias", taken, ErrDuplicate},
		{"canonical name collides", H100SXM80GB(), ErrDuplicate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultCatalog()
			err := c.AddGPU(tc.gpu)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("AddGPU error = %v, want %v", err, tc.wantErr)
			}
		})
	}
	t.Run("invalid gpu", func(t *testing.T) {
		c := DefaultCatalog()
		if err := c.AddGPU(bad); err == nil {
			t.Fatal("AddGPU accepted a NaN peak")
		}
	})
	t.Run("copies are independent", func(t *testing.T) {
		a := DefaultCatalog()
		b := a
		if err := b.AddGPU(mine); err != nil {
			t.Fatal(err)
		}
		if _, err := a.GPU("h100nvl"); !errors.Is(err, ErrUnknownGPU) {
			t.Errorf("adding to a copy changed the original: %v", err)
		}
		if _, err := b.GPU("H100-NVL"); err != nil {
			t.Errorf("added GPU not found: %v", err)
		}
	})
	t.Run("model duplicate", func(t *testing.T) {
		c := DefaultCatalog()
		m := Llama31x8B()
		m.Name, m.Aliases = "my-llama", []string{"LLAMA-3.1-8B"}
		if err := c.AddModel(m); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("AddModel error = %v, want ErrDuplicate", err)
		}
	})
}

func TestLookupReturnsCopies(t *testing.T) {
	g, err := LookupGPU("h100")
	if err != nil {
		t.Fatal(err)
	}
	g.Aliases[0] = "mutated"
	if _, err := LookupGPU("h100"); err != nil {
		t.Errorf("mutating a returned GPU changed the catalog: %v", err)
	}
	c := DefaultCatalog()
	ms := c.Models()
	ms[0].Aliases[0] = "mutated"
	if _, err := c.Model("meta-llama/Llama-3.1-8B"); err != nil {
		t.Errorf("mutating Models() changed the catalog: %v", err)
	}
}
