package vllm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseTestdata(t *testing.T) {
	cases := []struct {
		file string
		want Metrics
	}{
		{"vllm-v1-dp2.metrics", Metrics{
			Engines: 2, Models: []string{"meta-llama/Llama-3.1-8B-Instruct"}, Running: 21, Waiting: 3,
			KVUsage: (0.625*30000 + 0.375*10000) / 40000, NumGPUBlocks: 40000, BlockSize: 16,
			PrefixCacheQueries: 184320 + 161792, PrefixCacheHits: 131072 + 98304,
		}},
		{"vllm-v0.8.metrics", Metrics{
			Engines: 1, Models: []string{"Qwen/Qwen2.5-7B-Instruct"}, Running: 4, Waiting: 7,
			KVUsage: 0.9125, NumGPUBlocks: 27264, BlockSize: 16,
		}},
		{"sglang.metrics", Metrics{
			Engines: 1, Models: []string{"meta-llama/Llama-3.1-8B-Instruct"}, Running: 5, Waiting: 2, KVUsage: 0.25,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := Parse(f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	notVLLM, err := os.ReadFile(filepath.Join("testdata", "not-vllm.metrics"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		page     string
		sentinel error
	}{
		{"not vllm", string(notVLLM), ErrNoLoadMetrics},
		{"empty", "", ErrNoLoadMetrics},
		{"garbage", "vllm:num_requests_running{engine=\"0\" 3\n", nil},
		{"bad value", "vllm:num_requests_running abc\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.page))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("err = %v, want %v", err, tc.sentinel)
			}
			if !strings.HasPrefix(err.Error(), "vllm: ") {
				t.Errorf("err %q lacks the package prefix", err)
			}
		})
	}
}

func TestParseClamps(t *testing.T) {
	page := "vllm:num_requests_running -3\nvllm:num_requests_waiting NaN\nvllm:kv_cache_usage_perc 1.5\n"
	got, err := Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := Metrics{Engines: 1, KVUsage: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	engines := []Engine{
		{Model: "a", Index: 0, Running: 3, Waiting: 1, KVUsage: 0.5, NumGPUBlocks: 100, BlockSize: 16, PrefixCacheQueries: 1000, PrefixCacheHits: 640},
		{Model: "a", Index: 1, Running: 0, Waiting: 0, KVUsage: 0, NumGPUBlocks: 300, BlockSize: 16},
	}
	var buf bytes.Buffer
	if err := Write(&buf, engines); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# HELP vllm:num_requests_running", "# TYPE vllm:kv_cache_usage_perc gauge", `num_gpu_blocks="300"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page lacks %q:\n%s", want, buf.String())
		}
	}
	got, err := ParseEngines(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(engines, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	m := Aggregate(got)
	if m.KVUsage != 0.125 || m.NumGPUBlocks != 400 || m.Running != 3 {
		t.Errorf("aggregate = %+v", m)
	}
}
