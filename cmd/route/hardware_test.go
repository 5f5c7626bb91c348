package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHardwareGivesBackendsAStepTimeModel(t *testing.T) {
	cfg := writeFile(t, "hw.yaml", `
policy: predicted-ttft
backends: [big=http://a:8000, http://b:8000, http://c:8000]
hardware:
  big: {gpu: H100-SXM-80GB, model: llama-3.1-8b}
  http://b:8000/: {gpu: L4, model: llama-3.1-8b}
`)
	o, err := parseFlags([]string{"-config", cfg}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.load()
	if err != nil {
		t.Fatal(err)
	}
	big, l4 := c.Gateway.Prefill["big"], c.Gateway.Prefill["http://b:8000"]
	if big == nil || l4 == nil || len(c.Gateway.Prefill) != 2 {
		t.Fatalf("Prefill = %v, want models for big and http://b:8000 only", c.Gateway.Prefill)
	}
	fast, slow := big.PrefillTime(4096, 0, 0, 0), l4.PrefillTime(4096, 0, 0, 0)
	if fast <= 0 || slow <= 2*fast || slow > time.Minute {
		t.Errorf("4096-token prefill: H100 %v, L4 %v: want the L4 several times slower", fast, slow)
	}
}

func TestHardwareErrorsNameTheEntry(t *testing.T) {
	tests := []struct{ name, hw, want string }{
		{"unknown gpu", "a: {gpu: TPU, model: llama-3.1-8b}", "hardware.a.gpu"},
		{"unknown model", "a: {gpu: L4, model: gpt-9}", "hardware.a.model"},
		{"bad tp", "a: {gpu: L4, model: llama-3.1-8b, tp: -2}", "hardware.a.tp -2"},
		{"bad memory fraction", "a: {gpu: L4, model: llama-3.1-8b, gpu_memory_utilization: 2}", "hardware.a.gpu_memory_utilization 2"},
		{"bad quantization", "a: {gpu: L4, model: llama-3.1-8b, quantization: int3}", "hardware.a.quantization"},
		{"unknown release", "a: {gpu: L4, model: llama-3.1-8b, vllm: v0.5}", "hardware.a.vllm"},
		{"replicas belong to a fleet", "a: {gpu: L4, model: llama-3.1-8b, replicas: 2}", "field replicas not found"},
		{"no such backend", "zz: {gpu: L4, model: llama-3.1-8b}", "hardware.zz: no backend"},
		{"unknown field", "a: {gpu: L4, model: llama-3.1-8b, gpus: 2}", "field gpus not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "hw.yaml", "backends: [a=http://a:1]\nhardware:\n  "+tc.hw+"\n")
			o, err := parseFlags([]string{"-config", cfg}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := o.load(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestHardwareTakesTheFleetKeys prices a backend from a catalog GPU and the engine arguments
// a sweep file's fleet section takes: a faster GPU of the catalog prefills faster.
func TestHardwareTakesTheFleetKeys(t *testing.T) {
	cat, err := filepath.Abs(filepath.Join("..", "..", "examples", "catalogs", "l4-step-prices.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "hw.yaml", `
policy: predicted-ttft
catalog: `+cat+`
backends: [fast=http://a:8000, slow=http://b:8000]
hardware:
  fast: {gpu: L4-compute-fast, model: llama-3.1-8b, gpu_memory_utilization: 0.85, kv_cache_dtype: fp8, max_num_batched_tokens: 4096, vllm: v0.33}
  slow: {gpu: L4-compute-slow, model: llama-3.1-8b, max_num_seqs: 64, num_blocks: 1000}
`)
	o, err := parseFlags([]string{"-config", cfg}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.load()
	if err != nil {
		t.Fatal(err)
	}
	fast, slow := c.Gateway.Prefill["fast"].PrefillTime(4096, 0, 0, 0), c.Gateway.Prefill["slow"].PrefillTime(4096, 0, 0, 0)
	if fast <= 0 || slow <= fast {
		t.Errorf("4096-token prefill: fast L4 %v, slow L4 %v: want the fast one faster", fast, slow)
	}
}
