package workloads

import (
	"math"
	"math/rand/v2"
	"time"
)

// arrivals generates session start times, non-decreasing, until it reports arrivalOver;
// arrivalWait means none yet (a draining stage, until its requests finish).
type arrivals interface {
	next() (time.Duration, arrivalState)
}

// processArrivals accumulates inter-arrival gaps in float seconds (to avoid rounding drift).
// As in vllm bench serve, the first session arrives after one gap, not at 0.
type processArrivals struct {
	r     *rand.Rand
	a     ArrivalConfig
	t     float64   // seconds
	ahead []float64 // normalized absolute times still to hand out, seconds
}

// newArrivals returns the generator of a resolved, non-trace process. normalizeN > 0 with
// a.Normalize rescales the first normalizeN arrivals so the last lands on normalizeN/rate.
func newArrivals(a ArrivalConfig, r *rand.Rand, normalizeN int) arrivals {
	if len(a.Stages) > 0 {
		return newStagedArrivals(a, r)
	}
	p := &processArrivals{r: r, a: a}
	if a.Normalize && normalizeN > 0 {
		p.ahead = make([]float64, normalizeN)
		for i := range p.ahead {
			p.t += p.gap()
			p.ahead[i] = p.t
		}
		if last := p.t; last > 0 {
			scale := float64(normalizeN) / a.Rate / last
			for i := range p.ahead {
				p.ahead[i] *= scale
			}
			p.t = p.ahead[normalizeN-1]
		}
	}
	return p
}

// gap draws one inter-arrival time in seconds.
func (p *processArrivals) gap() float64 {
	return drawGap(p.r, p.a.Process, p.a.Rate, p.a.Burstiness)
}

func (p *processArrivals) next() (time.Duration, arrivalState) {
	if len(p.ahead) > 0 {
		t := p.ahead[0]
		p.ahead = p.ahead[1:]
		return seconds(t), arrivalReady
	}
	p.t += p.gap()
	return seconds(p.t), arrivalReady
}

// seconds converts float seconds to a Duration, saturating instead of overflowing.
func seconds(s float64) time.Duration {
	ns := s * 1e9
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// scaleDuration multiplies d by f, saturating instead of overflowing.
func scaleDuration(d time.Duration, f float64) time.Duration {
	if f == 1 {
		return d
	}
	return seconds(d.Seconds() * f)
}
