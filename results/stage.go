package results

// Stage is the summary of one load stage of a run whose arrivals came in stages (a load
// ladder, as inference-perf runs them): the requests that arrived during the stage, folded as
// a run of their own. Its throughput is therefore inference-perf's per-stage figure: tokens of
// the stage's completed requests over (last finish − first arrival) among them.
type Stage struct {
	// Index is the stage's position in the run's list of stages.
	Index int `json:"index"`
	// Rate is the stage's offered load in requests (sessions) per second.
	Rate float64 `json:"rate"`
	// Warmup marks a stage left out of StageMean.
	Warmup bool `json:"warmup,omitempty"`
	// StartS is when the stage began, in seconds from the start of the run.
	StartS float64 `json:"start_s"`
	// Metrics summarises the requests that arrived during the stage.
	Metrics Metrics `json:"metrics"`
}

// StageMean is the unweighted mean over a run's stages, warm-up stages and stages with no
// completed request left out: how llm-d's benchmark reports summarise a QPS ladder.
type StageMean struct {
	// Stages is the number of stages averaged.
	Stages int `json:"stages"`
	// TTFT and E2E are the means of the stages' distributions, field by field (ms).
	TTFT Dist `json:"ttft_ms"`
	E2E  Dist `json:"e2e_ms"`
	// ThroughputRPS, InputTokensPerS, OutputTokensPerS and HitRate are means of the stages'.
	ThroughputRPS    float64 `json:"throughput_rps"`
	InputTokensPerS  float64 `json:"input_tokens_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	HitRate          float64 `json:"hit_rate"`
}

// StageCollector folds a staged run's records into one Aggregator per stage. The zero value
// is not usable; call NewStageCollector.
type StageCollector struct {
	slo  SLO
	aggs []*Aggregator
}

// NewStageCollector returns an empty collector whose stages report goodput against slo (when
// set).
func NewStageCollector(slo SLO) *StageCollector { return &StageCollector{slo: slo} }

// Add folds record r into stage i (the stage its arrival fell in); i < 0 is ignored.
func (c *StageCollector) Add(i int, r *Record) {
	if i < 0 {
		return
	}
	for len(c.aggs) <= i {
		a := NewAggregator()
		a.SetSLO(c.slo)
		c.aggs = append(c.aggs, a)
	}
	c.aggs[i].Add(r)
}

// Metrics returns stage i's summary (empty when no record fell in it).
func (c *StageCollector) Metrics(i int) Metrics {
	if i < 0 || i >= len(c.aggs) {
		return NewAggregator().Metrics()
	}
	return c.aggs[i].Metrics()
}

// MeanOverStages returns the unweighted mean over stages (see StageMean), or nil when no
// stage qualifies.
func MeanOverStages(stages []Stage) *StageMean {
	var m StageMean
	for i := range stages {
		s := &stages[i].Metrics
		if stages[i].Warmup || s.Completed == 0 {
			continue
		}
		m.Stages++
		m.TTFT = addDist(m.TTFT, s.TTFT)
		m.E2E = addDist(m.E2E, s.E2E)
		m.ThroughputRPS += s.ThroughputRPS
		m.InputTokensPerS += s.InputTokensPerS
		m.OutputTokensPerS += s.OutputTokensPerS
		m.HitRate += s.HitRate
	}
	if m.Stages == 0 {
		return nil
	}
	n := float64(m.Stages)
	m.TTFT, m.E2E = scaleDist(m.TTFT, 1/n), scaleDist(m.E2E, 1/n)
	m.ThroughputRPS /= n
	m.InputTokensPerS /= n
	m.OutputTokensPerS /= n
	m.HitRate /= n
	return &m
}

func addDist(a, b Dist) Dist {
	return Dist{Mean: a.Mean + b.Mean, P50: a.P50 + b.P50, P90: a.P90 + b.P90, P99: a.P99 + b.P99}
}

func scaleDist(a Dist, f float64) Dist {
	return Dist{Mean: a.Mean * f, P50: a.P50 * f, P90: a.P90 * f, P99: a.P99 * f}
}
