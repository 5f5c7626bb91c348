package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"kvroute/results"
)

// groupPlan is one scenario group's runs, split by configured point (level): the unit report.md and the
// plots are organised by.
type groupPlan struct {
	name     string
	slug     string
	runs     []*results.Run
	levels   []level
	policies []string // variants, sorted; a variant's index picks its style in every plot of the group
	unit     string   // what the group's rates count, per second ("new conversations/s")
	tenants  bool     // some run had several tenants: the group answers on fairness too
}

// level is the runs of a group at one configured point, in input order: one configured
// arrival rate, or, where arrivals set their own pace (trace, stages, tenants with rates of
// their own), all the group's runs.
type level struct {
	key   string // the configured rate (loadKey), or noRate
	rate  float64
	runs  []*results.Run
	cells []*cell // the runs by policy variant, over replications
}

// noRate is the key of the one level of a group with no configured rate.
const noRate = "—"

// configured reports whether the level has a configured rate.
func (l level) configured() bool { return l.key != noRate }

// rateText is the level's rate with its unit ("30 new conversations/s"), or what sets the
// pace where no rate was configured.
func (l level) rateText(unit string) string {
	if !l.configured() {
		return "its configured arrivals (no single rate)"
	}
	return l.key + " " + unit
}

// planRuns groups runs by scenario group (sorted by name) and configured rate (ascending; one level where none was configured).
func planRuns(runs []results.Run) []groupPlan {
	byGroup := map[string]*groupPlan{}
	var names []string
	for i := range runs {
		r := &runs[i]
		g := byGroup[groupName(r)]
		if g == nil {
			g = &groupPlan{name: groupName(r)}
			byGroup[g.name] = g
			names = append(names, g.name)
		}
		g.runs = append(g.runs, r)
	}
	slices.Sort(names)
	slugs := newSlugger()
	out := make([]groupPlan, 0, len(names))
	for _, n := range names {
		g := byGroup[n]
		g.slug = slugs.unique(n)
		g.levels = levelsOf(g.runs)
		g.unit = rateUnit(g.runs)
		for _, r := range g.runs {
			if v := variantOf(r); !slices.Contains(g.policies, v) {
				g.policies = append(g.policies, v)
			}
			g.tenants = g.tenants || len(r.Metrics.Tenants) > 1
		}
		slices.Sort(g.policies)
		out = append(out, *g)
	}
	return out
}

func levelsOf(runs []*results.Run) []level {
	var out []level
	for _, r := range runs {
		k, rate := loadKey(r.RequestRate), r.RequestRate
		if r.RateMeasured {
			k, rate = noRate, 0
		}
		i := slices.IndexFunc(out, func(l level) bool { return l.key == k })
		if i < 0 {
			out = append(out, level{key: k, rate: rate})
			i = len(out) - 1
		}
		out[i].runs = append(out[i].runs, r)
	}
	for i := range out {
		out[i].cells = cellsOf(out[i].runs)
	}
	slices.SortStableFunc(out, func(a, b level) int {
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

// policyIndex returns the style index of a policy variant in g.
func (g *groupPlan) policyIndex(variant string) int {
	i, _ := slices.BinarySearch(g.policies, variant)
	return i
}

// top returns the group's highest configured rate (its one level without one).
func (g *groupPlan) top() level { return g.levels[len(g.levels)-1] }

// slugger makes file-name-safe, unique slugs.
type slugger map[string]bool

func newSlugger() slugger { return slugger{} }

// unique returns s lowercased with every run of characters other than [a-z0-9._] replaced by
// one '-', suffixed with -2, -3, … when taken.
func (u slugger) unique(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_'
		switch {
		case ok:
			b.WriteRune(c)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.Trim(b.String(), "-.")
	if base == "" {
		base = "x"
	}
	slug := base
	for n := 2; u[slug]; n++ {
		slug = fmt.Sprintf("%s-%d", base, n)
	}
	u[slug] = true
	return slug
}

// groupName returns r's scenario group name.
func groupName(r *results.Run) string {
	if r.Group == "" {
		return "all"
	}
	return r.Group
}

// conversationKinds are the workload kinds whose arrivals start multi-turn conversations:
// their rate counts new conversations, each of whose turns is a request.
var conversationKinds = []string{"synthetic-chat", "chat-prefixes"}

// rateUnit names what the runs' configured rates count, from their scenario's workload
// kind: new conversations per second for conversation workloads, requests otherwise.
func rateUnit(runs []*results.Run) string {
	for _, r := range runs {
		if k, _ := r.Scenario["workload"].(string); slices.Contains(conversationKinds, k) {
			return "new conversations/s"
		}
	}
	return "requests/s"
}

// loadKey formats a load level for grouping and display: four significant digits.
func loadKey(rate float64) string { return strconv.FormatFloat(rate, 'g', 4, 64) }
