package report

import (
	"fmt"
	"strings"

	"kvroute/results"
)

// Thresholds of the warnings a report raises about a run.
const (
	// ImbalanceShare flags a run whose busiest replica got more than this many times its
	// fair share (requests / replicas) of the requests.
	ImbalanceShare = 2.0
	// PreemptionRate flags a run with more preemptions than this fraction of its requests
	// (and at least MinPreemptions).
	PreemptionRate = 0.05
	MinPreemptions = 20
)

// runFlags returns what is wrong with one run, as phrases that follow its policy's name.
func runFlags(r *results.Run) []string {
	var out []string
	m := &r.Metrics
	if s := imbalance(r); s != "" {
		out = append(out, s)
	}
	if m.Preemptions >= MinPreemptions && float64(m.Preemptions) > PreemptionRate*float64(m.Requests) {
		out = append(out, fmt.Sprintf("preempted requests %s times in %s requests", thousands(int64(m.Preemptions)), thousands(int64(m.Requests))))
	}
	if m.Failed > 0 {
		out = append(out, fmt.Sprintf("failed %s of %s requests", thousands(int64(m.Failed)), thousands(int64(m.Requests))))
	}
	return out
}

// imbalance describes a run whose busiest replica got more than ImbalanceShare times its
// fair share, or returns "". The fleet size comes from the scenario's fleet.replicas (the
// endpoints that got requests when it is absent).
func imbalance(r *results.Run) string {
	total, top := 0, 0
	for _, c := range r.Metrics.Endpoints {
		total, top = total+c, max(top, c)
	}
	n, ok := scenarioInt(r.Scenario, "fleet", "replicas")
	if !ok {
		n = len(r.Metrics.Endpoints)
	}
	if n < 2 || total < 10*n || float64(top) <= ImbalanceShare*float64(total)/float64(n) {
		return ""
	}
	return fmt.Sprintf("sent %s of %s requests to one replica (a fair share is %s) and used %d of %d",
		thousands(int64(top)), thousands(int64(total)), thousands(int64(total/n)), len(r.Metrics.Endpoints), n)
}

// cellFlags returns a policy's warnings at one level: those of its worst replication (the
// one with the most), and in how many replications any was raised.
func cellFlags(c *cell) string {
	var worst []string
	wr, hit := 0, 0
	for _, r := range c.runs {
		f := runFlags(r)
		if len(f) > 0 {
			hit++
		}
		if len(f) > len(worst) {
			worst, wr = f, r.Replication
		}
	}
	if hit == 0 {
		return ""
	}
	s := c.variant + " " + strings.Join(worst, "; ")
	if len(c.runs) > 1 {
		s += fmt.Sprintf(" (replication %d; flagged in %d of %d replications)", wr, hit, len(c.runs))
	}
	return s
}

// writeFlags writes the warnings of every group and level, or nothing when there are none.
func writeFlags(b *strings.Builder, plan []groupPlan) {
	var lines []string
	for gi := range plan {
		g := &plan[gi]
		for _, l := range g.levels {
			for _, c := range l.cells {
				if f := cellFlags(c); f != "" {
					lines = append(lines, fmt.Sprintf("- %s at %s req/s: %s.", g.name, l.key, f))
				}
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "## Warnings\n\nRuns where one replica got more than %g× its fair share of requests, preemptions "+
		"exceeded %g%% of requests, or requests failed:\n\n%s\n\n", ImbalanceShare, 100*PreemptionRate, strings.Join(lines, "\n"))
}
