package vllm

import (
	"fmt"
	"io"
	"math"
	"slices"
)

// Histogram is one Prometheus histogram of a metrics page, summed over its engines and
// labels: its upper bounds (le, ascending, the last +Inf), the cumulative count at each, and
// the sum and count of the observations.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Sum    float64
	Count  float64
}

// ParseHistograms reads a metrics page and returns its histograms among names, as
// Page.Histograms.
func ParseHistograms(r io.Reader, names []string) (map[string]Histogram, error) {
	p, err := ParsePage(r)
	if err != nil {
		return nil, err
	}
	return p.Histograms(names)
}

// Histograms returns the histograms among names that the page has, each summed over its
// series (engines, models). A series whose bucket bounds differ from the family's first
// series' is an error; a name the page lacks is left out of the map.
func (p Page) Histograms(names []string) (map[string]Histogram, error) {
	families := p.families
	out := map[string]Histogram{}
	for _, name := range names {
		f := families[name]
		if f == nil {
			continue
		}
		var h Histogram
		for i, m := range f.GetMetric() {
			mh := m.GetHistogram()
			if mh == nil {
				return nil, fmt.Errorf("vllm: %s: not a histogram", name)
			}
			var bounds, counts []float64
			for _, b := range mh.GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
				counts = append(counts, float64(b.GetCumulativeCount()))
			}
			if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
				bounds = append(bounds, math.Inf(1))
				counts = append(counts, float64(mh.GetSampleCount()))
			}
			if i == 0 {
				h.Bounds, h.Counts = bounds, make([]float64, len(counts))
			} else if !slices.Equal(bounds, h.Bounds) {
				return nil, fmt.Errorf("vllm: %s: series with different buckets", name)
			}
			for k, c := range counts {
				h.Counts[k] += c
			}
			h.Sum += mh.GetSampleSum()
			h.Count += float64(mh.GetSampleCount())
		}
		if h.Bounds != nil {
			out[name] = h
		}
	}
	return out, nil
}
