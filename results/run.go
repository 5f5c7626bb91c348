package results

import (
	"fmt"
	"slices"
	"strconv"
)

// Run is one simulated or live run: what summary.json holds for it, plus the series its plots
// are drawn from.
type Run struct {
	// Name identifies the run; it is unique within a results directory.
	Name string `json:"name"`
	// Policy is the routing policy's registry type, such as "prefix-hash".
	Policy string `json:"policy"`
	// Scenario is the run's resolved parameters (workload, fleet, load, seed). It is encoded
	// with sorted keys; nil is written as {}.
	Scenario map[string]any `json:"scenario"`
	// Metrics is the run's summary.
	Metrics Metrics `json:"metrics"`
	// Group names the scenario group: runs that differ only in policy and load level and are
	// plotted together. Runs with no group form the group "all".
	Group string `json:"group,omitempty"`
	// RequestRate is the run's load level in requests per second (the offered rate, or the
	// measured arrival rate when none was given).
	RequestRate float64 `json:"request_rate"`
	// RateMeasured is set when no rate was configured (trace timestamps, load stages, tenants
	// with rates of their own) and RequestRate was measured from the arrivals. Runs compare
	// at their configured point: those of one group with RateMeasured are one load level
	// whatever their measured rates.
	RateMeasured bool `json:"rate_measured,omitempty"`
	// Replication is the run's 1-based replication number when its scenario ran with several
	// workload seeds (its name then ends in RepName's suffix), and 0 otherwise. Runs of one
	// group, load level and policy that differ only in Replication are one policy's samples;
	// runs of one replication saw the same requests, whatever their policy.
	Replication int `json:"replication,omitempty"`
	// Labels are free-form tags, such as "short" or "full".
	Labels []string `json:"labels,omitempty"`
	// Stages holds one summary per load stage when the run's arrivals came in stages, in
	// stage order; StageMean is their unweighted mean (MeanOverStages). Both are absent
	// otherwise.
	Stages    []Stage    `json:"stages,omitempty"`
	StageMean *StageMean `json:"stage_mean,omitempty"`
	// Series holds what the plots need. It is stored in series.json, not summary.json, and
	// may be nil.
	Series *Series `json:"-"`
}

// Series is the per-run data behind the plots, bounded in size whatever the request count.
type Series struct {
	// TTFTCDF is the distribution of time to first token (Histogram.CDF).
	TTFTCDF []CDFPoint `json:"ttft_cdf,omitempty"`
	// BucketS is the width of the service buckets in seconds; bucket i covers
	// [i·BucketS, (i+1)·BucketS) from the start of the run.
	BucketS float64 `json:"bucket_s,omitempty"`
	// PromptTokens and OutputTokens map a tenant to the tokens served to it in each bucket:
	// a completed request's prompt counts when its first token arrives, its output tokens
	// spread evenly from the first token to the finish. All slices have the same length.
	PromptTokens map[string][]int64 `json:"prompt_tokens,omitempty"`
	OutputTokens map[string][]int64 `json:"output_tokens,omitempty"`
}

// Tenants returns the tenants of the service series in sorted order.
func (s *Series) Tenants() []string {
	if s == nil {
		return nil
	}
	keys := make([]string, 0, len(s.PromptTokens))
	for k := range s.PromptTokens {
		keys = append(keys, k)
	}
	for k := range s.OutputTokens {
		if _, ok := s.PromptTokens[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Buckets returns the number of service buckets.
func (s *Series) Buckets() int {
	if s == nil {
		return 0
	}
	n := 0
	for _, v := range s.PromptTokens {
		n = max(n, len(v))
	}
	for _, v := range s.OutputTokens {
		n = max(n, len(v))
	}
	return n
}

// Service returns tenant's service in bucket i in the units of Metrics.JainFairness:
// prompt tokens plus twice the output tokens.
func (s *Series) Service(tenant string, i int) float64 {
	return float64(at(s.PromptTokens[tenant], i)) + 2*float64(at(s.OutputTokens[tenant], i))
}

// JainAt returns Jain's index over all tenants' service in bucket i, and false when no tenant
// was served in it.
func (s *Series) JainAt(i int) (float64, bool) {
	x := map[string]float64{}
	total := 0.0
	for _, t := range s.Tenants() {
		x[t] = s.Service(t, i)
		total += x[t]
	}
	if total == 0 {
		return 0, false
	}
	return Jain(x), true
}

// Tokens returns the prompt plus output tokens served to tenant in bucket i (0 past the
// tenant's last bucket).
func (s *Series) Tokens(tenant string, i int) int64 {
	return at(s.PromptTokens[tenant], i) + at(s.OutputTokens[tenant], i)
}

func at(v []int64, i int) int64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

// RepName is the name of replication rep (1-based) of the run called base.
func RepName(base string, rep int) string { return base + "#" + strconv.Itoa(rep) }

// ValidateRuns checks what the writers and readers of results directories rely on: run
// names present and unique.
func ValidateRuns(runs []Run) error {
	seen := map[string]bool{}
	for i := range runs {
		n := runs[i].Name
		switch {
		case n == "":
			return fmt.Errorf("results: run %d has no name", i)
		case seen[n]:
			return fmt.Errorf("results: run %d: duplicate name %q", i, n)
		}
		seen[n] = true
	}
	return nil
}
