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

// warning is one thing wrong with a run: its kind ("imbalance", "preemptions", "failures")
// and what was seen.
type warning struct{ kind, detail string }

// runWarnings returns what is wrong with one run.
func runWarnings(r *results.Run) []warning {
	var out []warning
	m := &r.Metrics
	if s := imbalance(r); s != "" {
		out = append(out, warning{"imbalance", s})
	}
	if m.Preemptions >= MinPreemptions && float64(m.Preemptions) > PreemptionRate*float64(m.Requests) {
		out = append(out, warning{"preemptions", fmt.Sprintf("preempted requests %s times in %s requests",
			thousands(int64(m.Preemptions)), thousands(int64(m.Requests)))})
	}
	if m.Failed > 0 {
		out = append(out, warning{"failures", fmt.Sprintf("failed %s of %s requests", thousands(int64(m.Failed)), thousands(int64(m.Requests)))})
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

// cellFlags returns a policy's warnings at one level as a phrase that follows its name: each
// kind's worst replication, and in how many replications it was raised.
func cellFlags(c *cell) string {
	var parts []string
	for _, w := range cellWarnings(c) {
		p := w.detail
		if len(c.runs) > 1 {
			p += fmt.Sprintf(" (replication %d; flagged in %d of %d replications)", w.rep, w.flagged, len(c.runs))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return c.variant + " " + strings.Join(parts, "; ")
}

// cellWarning is one kind of warning of a policy at one level, over its replications: in
// how many it was raised, and the worst replication's detail (by the count it reports first).
type cellWarning struct {
	kind, detail string
	flagged, rep int
}

// cellWarnings returns a policy's warnings at one level, one per kind, in kind order.
func cellWarnings(c *cell) []cellWarning {
	var out []cellWarning
	for _, kind := range []string{"imbalance", "preemptions", "failures"} {
		w := cellWarning{kind: kind}
		worst := -1
		for _, r := range c.runs {
			for _, rw := range runWarnings(r) {
				if rw.kind != kind {
					continue
				}
				w.flagged++
				if n := leadingCount(rw.detail); n > worst {
					worst, w.detail, w.rep = n, rw.detail, r.Replication
				}
			}
		}
		if w.flagged > 0 {
			out = append(out, w)
		}
	}
	return out
}

// leadingCount returns the first number in a warning's detail (commas allowed), 0 if none.
func leadingCount(s string) int {
	n, seen := 0, false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			n, seen = 10*n+int(c-'0'), true
		case c == ',' && seen:
		case seen:
			return n
		}
	}
	return n
}

// writeFlags writes the warnings of every group and level as one table, or nothing when
// there are none.
func writeFlags(b *strings.Builder, plan []groupPlan) {
	var rows []string
	for gi := range plan {
		g := &plan[gi]
		for _, l := range g.levels {
			for _, c := range l.cells {
				for _, w := range cellWarnings(c) {
					worst := "—"
					if w.rep > 0 {
						worst = fmt.Sprint(w.rep)
					}
					rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d/%d | %s | %s |", md(g.name), l.key, md(c.variant),
						w.kind, w.flagged, len(c.runs), worst, md(w.detail)))
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, SectionWarnings+"\n\nRuns where one replica got more than %g× its fair share of requests (imbalance), "+
		"preemptions exceeded %g%% of requests (preemptions), or requests failed (failures). *Flagged*: in how many "+
		"replications; the detail is the worst one's.\n\n| group | rate | policy | kind | flagged | worst replication | detail |\n"+
		"|---|---:|---|---|---:|---:|---|\n%s\n\n", ImbalanceShare, 100*PreemptionRate, strings.Join(rows, "\n"))
}
