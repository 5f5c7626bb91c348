package workloads

import (
	"math"
	"math/rand/v2"
)

// Stream tags keep the random streams of different purposes apart (see deriveSeed).
const (
	tagTenant uint64 = iota + 1
	tagArrival
	tagChoice
	tagOrder
	tagConversation
	tagSystem
	tagQuestion
	tagAnswer
	tagThink
	tagBlock
	tagPad
	tagRecord
)

// SplitMix64's increment and multipliers, for mix64 and fillKeyedPairs.
const (
	mixGamma = 0x9e3779b97f4a7c15
	mixMul1  = 0xbf58476d1ce4e5b9
	mixMul2  = 0x94d049bb133111eb
)

// mix64 is the SplitMix64 finaliser: a bijective 64-bit mixing function.
func mix64(x uint64) uint64 {
	x += mixGamma
	x = (x ^ (x >> 30)) * mixMul1
	x = (x ^ (x >> 27)) * mixMul2
	return x ^ (x >> 31)
}

// deriveSeed returns the seed of the sub-stream of seed named by parts, so that every
// subsystem, tenant, conversation and turn draws from its own stream and stays the same
// whatever order the others are used in.
func deriveSeed(seed uint64, parts ...uint64) uint64 {
	h := mix64(seed)
	for _, p := range parts {
		h = mix64(h ^ p)
	}
	return h
}

// newRand returns a PCG generator for the sub-stream of seed named by parts.
func newRand(seed uint64, parts ...uint64) *rand.Rand {
	p := new(rand.PCG)
	reseed(p, seed, parts...)
	return rand.New(p)
}

// reseed sets p to the start of the sub-stream newRand(seed, parts...) draws from, so that a
// generator reused for one short stream after another draws the same numbers without
// allocating one per stream.
func reseed(p *rand.PCG, seed uint64, parts ...uint64) {
	s := deriveSeed(seed, parts...)
	p.Seed(s, mix64(s^0x5851f42d4c957f2d))
}

// scratchRand is a generator reseeded for each short stream (see reseed).
type scratchRand struct {
	pcg rand.PCG
	r   *rand.Rand // draws from pcg
}

// at returns the generator positioned at the start of the sub-stream of seed named by parts.
func (g *scratchRand) at(seed uint64, parts ...uint64) *rand.Rand {
	if g.r == nil {
		g.r = rand.New(&g.pcg)
	}
	reseed(&g.pcg, seed, parts...)
	return g.r
}

// hashString returns the 64-bit FNV-1a hash of s, to name sub-streams by strings.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// sampleGamma draws from Gamma(shape, 1) by Marsaglia and Tsang's method; shapes below 1
// use the boost Gamma(shape+1)·U^(1/shape).
func sampleGamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return sampleGamma(r, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}

// sampleGeometric draws from the geometric distribution on 1, 2, … with the given mean
// (at least 1).
func sampleGeometric(r *rand.Rand, mean float64) int {
	if mean <= 1 {
		return 1
	}
	p := 1 / mean
	u := 1 - r.Float64() // in (0, 1]
	n := 1 + math.Floor(math.Log(u)/math.Log1p(-p))
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}

// lengthDist draws token counts.
type lengthDist struct {
	kind  string  // DistLogNormal, DistExponential or DistConstant
	mean  float64 // tokens
	sigma float64 // log-normal shape
	max   int     // upper clamp, tokens
}

// sample draws one length, rounded and clamped to 1..max.
func (d lengthDist) sample(r *rand.Rand) int {
	x := d.mean
	switch d.kind {
	case DistLogNormal:
		mu := math.Log(d.mean) - d.sigma*d.sigma/2
		x = math.Exp(mu + d.sigma*r.NormFloat64())
	case DistExponential:
		x = d.mean * r.ExpFloat64()
	}
	n := int(math.Min(math.Round(x), float64(d.max)))
	return max(n, 1)
}
