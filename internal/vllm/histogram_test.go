package vllm

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
