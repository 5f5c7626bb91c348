package results

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVLLMMetricsDecodesStrictly checks that a histogram or bucket without one of its keys,
// or with another key, is an error rather than a zero.
func TestVLLMMetricsDecodesStrictly(t *testing.T) {
	good := `{"runs": [{"run": "r", "servers": [{"url": "u", "histograms": {"h": {"buckets": [{"le": "+Inf", "count": 2}], "sum": 1.5, "count": 2}}}]}]}`
	want := VLLMMetrics{Runs: []RunHistograms{{Run: "r", Servers: []ServerHistograms{{URL: "u",
		Histograms: map[string]HistogramDelta{"h": {Buckets: []HistogramBucket{{LE: "+Inf", Count: 2}}, Sum: 1.5, Count: 2}}}}}}}
	var got VLLMMetrics
	if err := json.Unmarshal([]byte(good), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"histogram without sum", `"sum": 1.5, `, ``},
		{"histogram without count", `, "count": 2}}`, `}}`},
		{"bucket without le", `"le": "+Inf", `, ``},
		{"bucket without count", `, "count": 2}]`, `}]`},
		{"unknown histogram key", `"sum": 1.5`, `"total": 1.5`},
		{"unknown bucket key", `"le": "+Inf"`, `"le": "+Inf", "lt": "1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(good, tc.old, tc.new, 1)
			if doc == good {
				t.Fatalf("%q not in the document", tc.old)
			}
			var m VLLMMetrics
			if err := json.Unmarshal([]byte(doc), &m); err == nil {
				t.Errorf("decoded %s as %+v, want an error", doc, m)
			}
		})
	}
}
