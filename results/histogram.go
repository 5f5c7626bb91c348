package results

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Histogram is a log-bucketed histogram of durations from 1 µs to ~28 hours with buckets 1%
// wide: a quantile is exact to within 0.5%. The mean is exact. The zero value is empty and
// ready to use.
type Histogram struct {
	counts []uint64
	n      uint64
	sum    float64 // seconds
	min    time.Duration
	max    time.Duration
}

const (
	histMin   = float64(time.Microsecond)
	histRatio = 1.01
)

var histLogRatio = math.Log(histRatio)

// Add records d count times.
func (h *Histogram) Add(d time.Duration, count int) {
	if count <= 0 {
		return
	}
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if h.n == 0 || d > h.max {
		h.max = d
	}
	b := bucketOf(d)
	for len(h.counts) <= b {
		h.counts = append(h.counts, 0)
	}
	h.counts[b] += uint64(count)
	h.n += uint64(count)
	h.sum += d.Seconds() * float64(count)
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.n == 0 || o.max > h.max {
		h.max = o.max
	}
	for len(h.counts) < len(o.counts) {
		h.counts = append(h.counts, 0)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of values.
func (h *Histogram) Count() uint64 { return h.n }

// CountAtMost returns the number of values at most d, to within the values sharing d's 1%
// bucket (all of them are counted).
func (h *Histogram) CountAtMost(d time.Duration) uint64 {
	b := min(bucketOf(d), len(h.counts)-1)
	var n uint64
	for _, c := range h.counts[:b+1] {
		n += c
	}
	return n
}

// Mean returns the exact mean, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n) * 1e9)
}

// Quantile returns the q-quantile (0..1) as the midpoint of its bucket, clamped to the
// observed minimum and maximum; 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			var v float64
			if b > 0 {
				lo := histMin * math.Pow(histRatio, float64(b-1))
				v = lo * (1 + histRatio) / 2
			}
			d := time.Duration(v)
			return min(max(d, h.min), h.max)
		}
	}
	return h.max
}

// CDFPoint is one point of a cumulative distribution: a fraction Frac (0..1) of the values
// are at most Ms milliseconds. In JSON it is the pair [ms, frac].
type CDFPoint struct {
	Ms, Frac float64
}

// MarshalJSON writes the point as [ms, frac].
func (p CDFPoint) MarshalJSON() ([]byte, error) { return json.Marshal([2]float64{p.Ms, p.Frac}) }

// UnmarshalJSON reads a [ms, frac] pair.
func (p *CDFPoint) UnmarshalJSON(b []byte) error {
	var a []float64
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("cdf point %s: %w", b, err)
	}
	if len(a) != 2 {
		return fmt.Errorf("cdf point %s: want [ms, frac]", b)
	}
	p.Ms, p.Frac = a[0], a[1]
	return nil
}

// CDF returns the distribution as points at the upper edges of the non-empty buckets (clamped
// to the observed range, rounded to the microsecond), thinned so that successive points
// differ by at least 0.2% in fraction or 5% in value; the last point has Frac 1. It returns
// nil when h is empty. At most a few hundred points come back, whatever the count.
func (h *Histogram) CDF() []CDFPoint {
	if h.n == 0 {
		return nil
	}
	var out []CDFPoint
	var seen uint64
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		edge := time.Duration(histMin * math.Pow(histRatio, float64(b)))
		p := CDFPoint{Ms: durMs(min(max(edge, h.min), h.max)), Frac: float64(seen) / float64(h.n)}
		if seen == h.n || len(out) == 0 {
			out = append(out, p)
			continue
		}
		last := out[len(out)-1]
		if p.Frac-last.Frac >= 0.002 || p.Ms >= 1.05*last.Ms {
			out = append(out, p)
		}
	}
	return out
}

// durMs converts d to milliseconds rounded to the microsecond.
func durMs(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
