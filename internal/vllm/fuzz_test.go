package vllm

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzRoundTrip writes a two-engine page from fuzzed values, parses it back and checks the
// engines survive unchanged; the raw model string, fed to Parse as a page, must not panic it.
func FuzzRoundTrip(f *testing.F) {
	f.Add("llama", 3, 1, 0.5, 1000, 16, 2048.0, 1024.0)
	f.Add("", 0, 0, 0.0, 0, 0, 0.0, 0.0)
	f.Add("a\"b\\c\nd", 1<<20, 7, 1.0, 1, 1, 1e15, 3.5)
	f.Add("vllm:num_requests_running{engine=\"0\"} 3\n", 1, 2, 0.25, 5, 32, 1.0, 1.0)
	f.Fuzz(func(t *testing.T, model string, running, waiting int, kv float64, blocks, blockSize int, queries, hits float64) {
		_, _ = Parse(strings.NewReader(model))
		if !utf8.ValidString(model) {
			return // label values are UTF-8 in the text format
		}
		e := Engine{
			Model: model, Running: clampInt(running), Waiting: clampInt(waiting), KVUsage: fraction(kv),
			NumGPUBlocks: clampInt(blocks), BlockSize: clampInt(blockSize),
			PrefixCacheQueries: nonNegative(queries), PrefixCacheHits: nonNegative(hits),
		}
		if e.NumGPUBlocks == 0 {
			e.BlockSize = 0 // no cache_config_info line is written without a block count
		}
		other := e
		other.Index = 1
		engines := []Engine{e, other}
		var buf bytes.Buffer
		if err := Write(&buf, engines); err != nil {
			t.Fatal(err)
		}
		got, err := ParseEngines(&buf)
		if err != nil {
			t.Fatalf("%v\n%s", err, buf.String())
		}
		if diff := cmp.Diff(engines, got); diff != "" {
			t.Fatalf("(-want +got):\n%s\npage:\n%s", diff, buf.String())
		}
	})
}

func clampInt(v int) int {
	if v < 0 {
		return 0
	}
	return min(v, math.MaxInt32)
}

// FuzzPage feeds raw text to ParsePage and checks that the page, parsed once, reads as
// Parse and ParseHistograms read the same text, errors included, and that nothing panics.
func FuzzPage(f *testing.F) {
	for _, name := range []string{"vllm-v1-dp2.metrics", "sglang.metrics", "not-vllm.metrics"} {
		page, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(page), ttft)
	}
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{engine=\"1\",le=\"2\"} 1\n", "h")
	f.Fuzz(func(t *testing.T, text, name string) {
		names := []string{name, ttft}
		page, perr := ParsePage(strings.NewReader(text))
		m, merr := Parse(strings.NewReader(text))
		h, herr := ParseHistograms(strings.NewReader(text), names)
		if perr != nil {
			if merr == nil || herr == nil || perr.Error() != merr.Error() || perr.Error() != herr.Error() {
				t.Fatalf("ParsePage %v, Parse %v, ParseHistograms %v", perr, merr, herr)
			}
			return
		}
		gotM, gotMErr := page.Metrics()
		gotH, gotHErr := page.Histograms(names)
		if errString(gotMErr) != errString(merr) || errString(gotHErr) != errString(herr) {
			t.Fatalf("errors: page %v, %v; one-shot %v, %v", gotMErr, gotHErr, merr, herr)
		}
		if diff := cmp.Diff(m, gotM, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("metrics (-Parse +Page):\n%s", diff)
		}
		if diff := cmp.Diff(h, gotH, cmpopts.EquateNaNs()); diff != "" {
			t.Fatalf("histograms (-ParseHistograms +Page):\n%s", diff)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
