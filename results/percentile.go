package results

import "math"

// Percentile returns the p-th percentile (p in [0, 100]) of sorted, an ascending slice, as
// numpy.percentile's default computes it (linear interpolation between the two nearest ranks)
// and so as `vllm bench serve` reports its median and pXX keys; 0 when sorted is empty. The
// caller sorts once for all the percentiles it takes.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}
