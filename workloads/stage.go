package workloads

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// arrivalState says whether an arrival process has a next arrival.
type arrivalState int8

const (
	arrivalReady arrivalState = iota // the returned time is the next arrival
	arrivalWait                      // none yet: a draining stage waits for its requests
	arrivalOver                      // none ever: the last stage is over
)

// StageSpan is one stage of a staged arrival process (ArrivalConfig.Stages) as it ran.
type StageSpan struct {
	// Index is the stage's position in ArrivalConfig.Stages.
	Index int
	// Rate is the stage's offered sessions per second.
	Rate float64
	// Warmup is the stage's StageConfig.Warmup.
	Warmup bool
	// Start is when the stage began, from the start of the run. Every session the stage
	// starts arrives at or after Start and before the next stage's Start.
	Start time.Duration
	// Sessions is the number of sessions the stage started so far.
	Sessions int
}

// stagedArrivals runs the stages of a resolved staged ArrivalConfig one after another. With
// Drain it is inference-perf's load generator: stage k sends n = floor(rate·duration)
// sessions from a timer started 1 s after the stage begins, then waits until every one has
// finished (done) and the poll of its 1 s grid after the duration sees it, and the next stage
// begins StageInterval later. Poisson stages use inference-perf's timer: each second gets a
// Poisson(rate) count of arrivals, spaced by exponential gaps scaled to fill the second (the
// last lands on its end).
// Without Drain the stages share the clock: stage k offers its rate from its start for its
// duration, and the backlog carries on.
type stagedArrivals struct {
	a        ArrivalConfig
	drain    bool
	r        *rand.Rand
	k        int       // current stage; len(a.Stages) when over
	begin    float64   // the current stage's start, seconds
	origin   float64   // its timer's start, seconds
	t        float64   // the timer's position: the last arrival or the end of the last second, seconds
	n        int       // sessions the current stage sends (Drain)
	issued   int       // sessions handed out in the current stage
	finished int       // of those, reported finished (Drain)
	lastDone float64   // the latest finish among them, seconds
	second   []float64 // the rest of the current second's arrival times (Drain, Poisson)
	spans    []StageSpan
}

func newStagedArrivals(a ArrivalConfig, r *rand.Rand) *stagedArrivals {
	s := &stagedArrivals{a: a, drain: a.Drain == nil || *a.Drain, r: r}
	s.start(0, 0)
	return s
}

// start begins stage k at begin seconds.
func (s *stagedArrivals) start(k int, begin float64) {
	s.k, s.begin = k, begin
	if k == len(s.a.Stages) {
		return
	}
	st := s.a.Stages[k]
	s.spans = append(s.spans, StageSpan{Index: k, Rate: st.Rate, Warmup: st.Warmup, Start: seconds(begin)})
	s.origin, s.issued, s.finished, s.lastDone, s.second = begin, 0, 0, 0, s.second[:0]
	if s.drain {
		s.origin = begin + 1 // inference-perf lets its workers fill the queue for a second
		s.n = int(st.Rate * st.Duration.Seconds())
	}
	s.t = s.origin
}

// next returns the next arrival, or why there is none now.
func (s *stagedArrivals) next() (time.Duration, arrivalState) {
	for s.k < len(s.a.Stages) {
		st := s.a.Stages[s.k]
		if !s.drain {
			if t := s.t + drawGap(s.r, s.a.Process, st.Rate, s.a.Burstiness); t < s.begin+st.Duration.Seconds() {
				return s.issue(t)
			}
			s.start(s.k+1, s.begin+st.Duration.Seconds())
			continue
		}
		if s.issued < s.n {
			return s.issue(s.drawDrained(st.Rate))
		}
		if s.finished < s.issued {
			return 0, arrivalWait
		}
		end := s.origin + st.Duration.Seconds()
		if s.lastDone > end { // the loop polls once a second after the duration
			end += math.Ceil(s.lastDone - end)
		}
		s.start(s.k+1, end+s.a.StageInterval.Seconds())
	}
	return 0, arrivalOver
}

func (s *stagedArrivals) issue(t float64) (time.Duration, arrivalState) {
	s.t = t
	s.issued++
	s.spans[s.k].Sessions++
	return seconds(t), arrivalReady
}

// drawDrained draws the next arrival time of a draining stage at rate.
func (s *stagedArrivals) drawDrained(rate float64) float64 {
	if s.a.Process != ProcessPoisson {
		return s.t + drawGap(s.r, s.a.Process, rate, s.a.Burstiness)
	}
	if len(s.second) == 0 {
		c := s.skipEmptySeconds(rate)
		sum := 0.0
		for range c {
			sum += s.r.ExpFloat64()
			s.second = append(s.second, sum)
		}
		for i := range s.second {
			s.second[i] = s.t + s.second[i]/sum
		}
		s.second[c-1] = s.t + 1 // exactly the end of the second, as the scaled gaps sum to 1
	}
	t := s.second[0]
	s.second = s.second[1:]
	return t
}

// done records that a session of the current stage finished at t.
func (s *stagedArrivals) done(t time.Duration) {
	s.finished++
	s.lastDone = max(s.lastDone, t.Seconds())
}

// stage returns the index of the current stage.
func (s *stagedArrivals) stage() int { return s.k }

// stageAt returns the index of the stage that was running at t, or -1 before the first.
func stageAt(spans []StageSpan, t time.Duration) int {
	return sort.Search(len(spans), func(i int) bool { return spans[i].Start > t }) - 1
}

// drawGap draws one inter-arrival time in seconds of a rated process.
func drawGap(r *rand.Rand, p Process, rate, burstiness float64) float64 {
	switch p {
	case ProcessPoisson:
		return r.ExpFloat64() / rate
	case ProcessGamma:
		return sampleGamma(r, burstiness) / (rate * burstiness)
	case ProcessConstant:
		return 1 / rate
	}
	return 0 // immediate
}

// skipEmptySeconds moves the timer over the seconds with no arrival and returns the count of
// the next second that has some. Per-second counts are those of a rate-rate Poisson process,
// independent Poisson(rate), as inference-perf draws them; walking the process instead of the
// seconds skips long empty stretches at low rates in one step.
func (s *stagedArrivals) skipEmptySeconds(rate float64) int {
	first := s.r.ExpFloat64() / rate
	skip := math.Floor(first)
	s.t += skip
	n := 1
	for t := first - skip + s.r.ExpFloat64()/rate; t < 1; t += s.r.ExpFloat64() / rate {
		n++
	}
	return n
}
