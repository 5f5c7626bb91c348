package sweep

import (
	"errors"
	"fmt"
	"strings"

	"kvroute/results"
	"kvroute/router/tokenize"
	"kvroute/sim"
	"kvroute/workloads"
)

// Workload returns the point's workload configuration.
func (p Point) Workload() workloads.Config {
	return workloads.Config{Workload: p.File.Workload, Arrival: p.Arrival, Requests: p.Requests, Duration: p.Duration}
}

// WorkloadSeed is the seed of the point's request stream: it depends only on the file's seed,
// so every policy of a point, simulated or live, sees the same requests.
func (p Point) WorkloadSeed() uint64 { return sim.SubSeed(p.Seed, "workload") }

// RouterSeed is the seed of the routing policy's random source: RouterSeed of the file's seed.
func (p Point) RouterSeed() uint64 { return RouterSeed(p.Seed) }

// RouterSeed derives the seed of a routing policy's random source from a master seed (a
// sweep file's seed, cmd/route's seed), so that the same seed gives the same policy random
// stream in the simulator and in the router.
func RouterSeed(master uint64) uint64 { return sim.SubSeed(master, "router") }

// MaxReplications bounds replications: each one is a full run of every policy.
const MaxReplications = 1000

// Reps is the number of replications of the point: Replications, at least 1.
func (p Point) Reps() int { return max(p.Replications, 1) }

// WorkloadSeedOf is the workload seed of replication rep (0-based): replication 0 is
// WorkloadSeed, so a file gives the same requests with or without replications.
func (p Point) WorkloadSeedOf(rep int) uint64 {
	if rep == 0 {
		return p.WorkloadSeed()
	}
	return sim.SubSeed(p.Seed, fmt.Sprintf("workload/%d", rep))
}

// RouterSeedOf is the router seed of replication rep (0-based), RouterSeed for rep 0.
func (p Point) RouterSeedOf(rep int) uint64 {
	if rep == 0 {
		return p.RouterSeed()
	}
	return sim.SubSeed(p.Seed, fmt.Sprintf("router/%d", rep))
}

// SLO returns the file's goodput objectives.
func (p Point) SLO() results.SLO {
	return results.SLO{TTFTMs: p.File.SLO.TTFTMs, TPOTMs: p.File.SLO.TPOTMs, E2EMs: p.File.SLO.E2EMs}
}

// Group names the runs plotted together: the point without its arrival rate.
func (p Point) Group() string {
	var parts []string
	for _, a := range p.Axes {
		if a.Path != "arrival.rate" {
			parts = append(parts, a.short())
		}
	}
	if len(parts) == 0 {
		return p.Name
	}
	return p.Name + " " + strings.Join(parts, ",")
}

func (a AxisValue) short() string {
	return a.Path[strings.LastIndexByte(a.Path, '.')+1:] + "=" + a.Value
}

// LoadKey identifies the point's traffic: its values of the axes that change the requests
// (workload, arrival, requests, duration, seed). Points that differ only in fleet or router
// send the same requests.
func (p Point) LoadKey() string {
	var parts []string
	for _, a := range p.Axes {
		if !strings.HasPrefix(a.Path, "fleet.") && !strings.HasPrefix(a.Path, "router.") {
			parts = append(parts, a.short())
		}
	}
	if len(parts) == 0 {
		return "base"
	}
	return strings.Join(parts, ",")
}

// Validate checks what every use of a point needs: a name, an end, a valid workload and SLO,
// and named policies. Commands add their own checks (the simulator: fleet and policies).
func (p Point) Validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("name: required"))
	}
	if p.Requests <= 0 && p.Duration <= 0 && len(p.Arrival.Stages) == 0 {
		errs = append(errs, errors.New("requests or duration: one is required (or arrival.stages), so the run ends"))
	}
	if p.Replications < 0 || p.Replications > MaxReplications {
		errs = append(errs, fmt.Errorf("replications: want 0..%d, got %d", MaxReplications, p.Replications))
	}
	if err := p.Workload().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := p.SLO().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("slo: %w", err))
	}
	for i, ps := range p.Policies {
		if ps.Name == "" {
			errs = append(errs, fmt.Errorf("policies[%d]: no name", i))
		}
	}
	return errors.Join(errs...)
}

// StreamOptions returns the workloads options a point's stream needs: the project's tiktoken
// tokenizer when the workload reads dataset text (ShareGPT), whose token counts must match
// what the model would see.
func (p Point) StreamOptions() ([]workloads.Option, error) {
	if !usesDataset(p.File.Workload) {
		return nil, nil
	}
	tok, err := tokenize.NewTiktoken()
	if err != nil {
		return nil, err
	}
	return []workloads.Option{workloads.WithTokenizer(tiktokenIDs{tok})}, nil
}

// usesDataset reports whether the workload reads text that needs the real tokenizer.
func usesDataset(w workloads.WorkloadConfig) bool {
	if w.Kind == workloads.KindShareGPT {
		return true
	}
	for _, t := range w.Tenants {
		if t.Workload.Kind == workloads.KindShareGPT {
			return true
		}
	}
	return false
}

// tiktokenIDs adapts the project's tiktoken to workloads.Tokenizer.
type tiktokenIDs struct{ t *tokenize.Tiktoken }

func (t tiktokenIDs) Encode(text string) []int32 {
	ids := t.t.Encode(text)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
