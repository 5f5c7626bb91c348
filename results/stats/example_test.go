package stats_test

import (
	"fmt"

	"kvroute/results/stats"
)

// Two policies ran on the same five workload seeds; the second's p99 TTFT is compared with
// the first's by the paired t-test on log ratios.
func ExamplePairedT() {
	best := []float64{410, 520, 380, 450, 470}
	other := []float64{1290, 1500, 1100, 1400, 1350}
	ratio, p := stats.PairedT(other, best, true)
	fmt.Printf("%.2f× [%.2f, %.2f], p = %.1g, significant: %v\n", ratio.Mean, ratio.Lo, ratio.Hi, p, ratio.Excludes(1))
	// Output: 2.98× [2.82, 3.15], p = 7e-07, significant: true
}
