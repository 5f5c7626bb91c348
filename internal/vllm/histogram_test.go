package vllm

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const ttft = "vllm:time_to_first_token_seconds"

func TestParseHistograms(t *testing.T) {
	page := `# TYPE h histogram
h_bucket{engine="0",le="0.5"} 1
h_bucket{engine="0",le="+Inf"} 3
h_sum{engine="0"} 2.5
h_count{engine="0"} 3
h_bucket{engine="1",le="0.5"} 2
h_bucket{engine="1",le="+Inf"} 2
h_sum{engine="1"} 0.5
h_count{engine="1"} 2
# TYPE open histogram
open_bucket{le="1"} 4
open_sum 3
open_count 6
`
	got, err := ParseHistograms(strings.NewReader(page), []string{"h", "open", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Histogram{
		"h":    {Bounds: []float64{0.5, math.Inf(1)}, Counts: []float64{3, 5}, Sum: 3, Count: 5},
		"open": {Bounds: []float64{1, math.Inf(1)}, Counts: []float64{4, 6}, Sum: 3, Count: 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseHistogramsErrors(t *testing.T) {
	cases := []struct{ name, page, want string }{
		{"not a histogram", "h 1\n", "vllm: h: not a histogram"},
		{"different buckets", "# TYPE h histogram\nh_bucket{engine=\"0\",le=\"1\"} 1\nh_bucket{engine=\"1\",le=\"2\"} 1\n",
			"vllm: h: series with different buckets"},
		{"garbage", "h{le=\"1\" 1\n", "vllm: parse metrics: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHistograms(strings.NewReader(tc.page), []string{"h"})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPageOnce checks that a page parsed once reads as Parse, ParseEngines and
// ParseHistograms read it, in either order.
func TestPageOnce(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "vllm-v1-dp2.metrics"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := ParsePage(strings.NewReader(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	hists, err := page.Histograms([]string{ttft})
	if err != nil {
		t.Fatal(err)
	}
	wantHists, err := ParseHistograms(strings.NewReader(string(text)), []string{ttft})
	if err != nil || len(wantHists) != 1 {
		t.Fatalf("ParseHistograms: %v, %v", wantHists, err)
	}
	if diff := cmp.Diff(wantHists, hists); diff != "" {
		t.Errorf("histograms (-ParseHistograms +Page):\n%s", diff)
	}
	m, err := page.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	wantM, _ := Parse(strings.NewReader(string(text)))
	if diff := cmp.Diff(wantM, m); diff != "" {
		t.Errorf("metrics (-Parse +Page):\n%s", diff)
	}
	engines, err := page.Engines()
	if err != nil {
		t.Fatal(err)
	}
	wantE, _ := ParseEngines(strings.NewReader(string(text)))
	if diff := cmp.Diff(wantE, engines); diff != "" {
		t.Errorf("engines (-ParseEngines +Page):\n%s", diff)
	}
}

func TestZeroPage(t *testing.T) {
	var p Page
	if _, err := p.Metrics(); err != ErrNoLoadMetrics {
		t.Errorf("Metrics err = %v, want ErrNoLoadMetrics", err)
	}
	if h, err := p.Histograms([]string{ttft}); err != nil || len(h) != 0 {
		t.Errorf("Histograms = %v, %v; want none", h, err)
	}
}
