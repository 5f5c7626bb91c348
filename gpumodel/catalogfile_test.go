package gpumodel

import (
	"bytes"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadCatalogExample(t *testing.T) {
	f, err := os.Open("testdata/catalog_example.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := LoadCatalog(f, "testdata/catalog_example.json")
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.GPU("rtx6000ada")
	if err != nil {
		t.Fatal(err)
	}
	if g.PeakFLOPS != 364.2e12 || g.MemoryBytes != gib(47.5) || g.LinkLatency != 30*time.Microsecond {
		t.Errorf("RTX-6000-Ada = %+v", g)
	}
	tuned, err := c.GPU("h100-tuned")
	if err != nil {
		t.Fatal(err)
	}
	want := H100SXM80GB()
	want.Name, want.Aliases, want.Efficiency.PrefillMFU = "H100-tuned", nil, 0.6
	if !gpuEqual(tuned, want) {
		t.Errorf("base override:\n got %+v\nwant %+v", tuned, want)
	}
	fp8, err := c.Model("RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	if fp8.Quantization != QuantFP8 || fp8.DTypeBytes != 2 || fp8.Layers != 28 || fp8.Params != Qwen25x7B().Params {
		t.Errorf("FP8 model = %+v", fp8)
	}
	if _, err := c.Model("qwen2.5-0.5b"); err != nil {
		t.Error(err)
	}
	if _, err := c.GPU("H100"); err != nil {
		t.Errorf("built-ins missing after LoadCatalog: %v", err)
	}
}

const validGPU = `{"name": "X", "peak_tflops": 100, "memory_gib": 40, "memory_bandwidth_tbps": 1,
 "link_bandwidth_gbps": 32, "link_latency_us": 20,
 "efficiency": {"prefill_mfu": 0.5, "decode_mfu": 0.3, "memory": 0.8, "link": 0.8}}`

func TestLoadCatalogErrors(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		wantLine int
		want     string // substring of the error
		wantErr  error  // optional sentinel
	}{
		{"empty input", "", 1, "unexpected end of input", nil},
		{"not an object", `[]`, 1, `want "{"`, nil},
		{"unknown top-level field", "{\n\"gpu\": []}", 2, `unknown field "gpu"`, nil},
		{"unknown gpu field", "{\"gpus\": [\n{\"name\": \"X\", \"peak_tflop\": 1}]}", 2, `unknown field "peak_tflop"`, nil},
		{"wrong type", "{\"gpus\": [\n{\"name\": \"X\",\n \"peak_tflops\": \"fast\"}]}", 3, `field "peak_tflops"`, nil},
		{"missing fields", `{"gpus": [{"name": "X", "peak_tflops": 1}]}`, 1, `missing required fields ["memory_gib"`, nil},
		{"missing efficiency field", `{"gpus": [` + strings.Replace(validGPU, `"link": 0.8`, `"lnk": 0.8`, 1) + `]}`,
			3, `unknown field "lnk"`, nil},
		{"invalid efficiency", `{"gpus": [` + strings.Replace(validGPU, `"prefill_mfu": 0.5`, `"prefill_mfu": 1.5`, 1) + `]}`,
			1, "prefill_mfu must be in (0, 1]", nil},
		{"negative memory", `{"gpus": [` + strings.Replace(validGPU, `"memory_gib": 40`, `"memory_gib": -1`, 1) + `]}`,
			1, "memory_gib must be in", nil},
		{"duplicate of a built-in", `{"gpus": [{"name": "h100", "base": "L4"}]}`, 1, "duplicate", ErrDuplicate},
		{"duplicate within the file", `{"gpus": [` + validGPU + ",\n" + validGPU + `]}`, 4, `gpus[1] "X"`, ErrDuplicate},
		{"unknown base", `{"models": [{"name": "m", "base": "gpt-5"}]}`, 1, "base", ErrUnknownModel},
		{"bad model shape", `{"models": [{"name": "m", "base": "Llama-3.1-8B", "kv_heads": 5}]}`, 1,
			"must be a multiple of kv_heads", nil},
		{"unknown quantization", `{"models": [{"name": "m", "base": "Llama-3.1-8B", "quantization": "int3"}]}`, 1,
			`unknown quantization "int3"`, nil},
		{"negative custom all-reduce latency", `{"gpus": [{"name": "g", "base": "h100", "custom_all_reduce_latency_us": -1}]}`, 1,
			"custom_all_reduce_latency_us must be in", nil},
		{"negative fp8 peak", `{"gpus": [{"name": "g", "base": "L4", "peak_fp8_tflops": -1}]}`, 1, "peak FP8 FLOP/s", nil},
		{"empty alias", `{"models": [{"name": "m", "base": "Llama-3.1-8B", "aliases": [""]}]}`, 1, "aliases must not be empty", nil},
		{"gpus not an array", `{"gpus": {}}`, 1, "must be an array", nil},
		{"syntax error line", "{\"gpus\": [\n\n{\"name\": ,}]}", 3, "invalid character", nil},
		{"trailing data", `{} {}`, 1, "trailing data", nil},
		{"unterminated", `{"gpus": [`, 1, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCatalog(strings.NewReader(tc.input), "my.json")
			if err == nil {
				t.Fatal("LoadCatalog succeeded, want an error")
			}
			var ce *CatalogError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *CatalogError", err, err)
			}
			if ce.File != "my.json" || ce.Line != tc.wantLine {
				t.Errorf("error at %s line %d, want my.json line %d: %v", ce.File, ce.Line, tc.wantLine, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "gpumodel: catalog my.json") {
				t.Errorf("error %q does not start with the file and contain %q", err, tc.want)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v does not wrap %v", err, tc.wantErr)
			}
		})
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	raw, err := os.ReadFile("testdata/catalog_example.json")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, raw)
}

// roundTrip loads data, writes it back, loads that, and compares the entries.
// It returns false when data is not a valid catalog.
func roundTrip(t *testing.T, data []byte) bool {
	t.Helper()
	c1, err := LoadCatalog(bytes.NewReader(data), "in")
	if err != nil {
		var ce *CatalogError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "gpumodel: catalog in") {
			t.Fatalf("error %q is not a *CatalogError naming the file", err)
		}
		return false
	}
	var buf bytes.Buffer
	if err := c1.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	c2, err := LoadCatalog(bytes.NewReader(buf.Bytes()), "out")
	if err != nil {
		t.Fatalf("reloading the written catalog: %v\n%s", err, buf.Bytes())
	}
	g1, g2 := c1.GPUs(), c2.GPUs()
	m1, m2 := c1.Models(), c2.Models()
	if len(g1) != len(g2) || len(m1) != len(m2) {
		t.Fatalf("round trip changed the entry counts: %d/%d gpus, %d/%d models", len(g1), len(g2), len(m1), len(m2))
	}
	for i := range g1 {
		if !gpuEqual(g1[i], g2[i]) {
			t.Errorf("gpu %d changed:\n got %+v\nwant %+v", i, g2[i], g1[i])
		}
	}
	for i := range m1 {
		if !modelEqual(m1[i], m2[i]) {
			t.Errorf("model %d changed:\n got %+v\nwant %+v", i, m2[i], m1[i])
		}
	}
	return true
}

func approxEqual(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

func gpuEqual(a, b GPU) bool {
	return a.Name == b.Name && strings.Join(a.Aliases, "\x00") == strings.Join(b.Aliases, "\x00") &&
		approxEqual(a.PeakFLOPS, b.PeakFLOPS) && a.MemoryBytes == b.MemoryBytes &&
		approxEqual(a.MemoryBandwidth, b.MemoryBandwidth) && approxEqual(a.LinkBandwidth, b.LinkBandwidth) &&
		a.LinkLatency == b.LinkLatency && a.Efficiency == b.Efficiency &&
		approxEqual(a.HostBandwidth, b.HostBandwidth) && approxEqual(a.NICGbps, b.NICGbps)
}

func modelEqual(a, b Model) bool {
	same := strings.Join(a.Aliases, "\x00") == strings.Join(b.Aliases, "\x00")
	a.Aliases, b.Aliases = nil, nil
	return same && reflect.DeepEqual(a, b)
}

func FuzzLoadCatalog(f *testing.F) {
	if raw, err := os.ReadFile("testdata/catalog_example.json"); err == nil {
		f.Add(raw)
	}
	f.Add([]byte(`{"gpus": [` + validGPU + `]}`))
	f.Add([]byte(`{"models": [{"name": "m", "base": "Llama-3.1-8B", "dtype_bytes": 1}]}`))
	f.Add([]byte(`{"gpus": [{"name": "g", "base": "h100", "link_latency_us": 1e300}]}`))
	f.Add([]byte(`{"gpus": [{"name": "g", "base": "a100", "custom_all_reduce_latency_us": 9.5}]}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"gpus": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data)
	})
}
