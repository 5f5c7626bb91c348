package tune

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"kvroute/results/stats"
)

// Ranking orders policies by their objective on the fresh replications, with defaults and
// with tuned parameters: does tuning change which policy to pick? Every policy's
// comparison ran on the same replications of the same point, so policies pair too.
type Ranking struct {
	Objective Objective `json:"objective"`
	Rows      []RankRow `json:"rows"`
	// BestDefault and BestTuned are the first policy of each order.
	BestDefault string `json:"best_default"`
	BestTuned   string `json:"best_tuned"`
	// Lead is the tuned best over the tuned runner-up (ratio, or difference for a value to
	// raise) with its interval and paired p-value: whether the tuned winner's lead is real.
	RunnerUp string         `json:"runner_up_tuned"`
	Lead     stats.Interval `json:"lead"`
	LeadP    float64        `json:"lead_p"`
	// Spearman is the rank correlation of the two orders (1: the same order).
	Spearman float64 `json:"spearman"`
}

// RankRow is one policy of a Ranking; ranks are 1-based.
type RankRow struct {
	Policy      string         `json:"policy"`
	Verdict     string         `json:"verdict"`
	Default     stats.Interval `json:"default"`
	Tuned       stats.Interval `json:"tuned"`
	Paired      stats.Interval `json:"paired"`
	DefaultRank int            `json:"default_rank"`
	TunedRank   int            `json:"tuned_rank"`
	tuned       []float64
}

// Rank ranks the results of several policies on one point; they must share the objective
// and the fresh replications.
func Rank(rs []Result) (Ranking, error) {
	if len(rs) == 0 {
		return Ranking{}, fmt.Errorf("tune: nothing to rank")
	}
	obj := rs[0].Objective
	k := Ranking{Objective: obj}
	for _, r := range rs {
		if r.Objective != obj || !slices.Equal(r.Comparison.Reps, rs[0].Comparison.Reps) {
			return Ranking{}, fmt.Errorf("tune: %s ran another objective or other replications than %s", r.Policy, rs[0].Policy)
		}
		c := r.Comparison
		k.Rows = append(k.Rows, RankRow{Policy: r.Policy, Verdict: c.Verdict, Default: c.DefaultCI, Tuned: c.TunedCI, Paired: c.Paired, tuned: c.Tuned})
	}
	better := func(a, b float64) int {
		if obj.Maximize {
			return cmp.Compare(b, a)
		}
		return cmp.Compare(a, b)
	}
	byDefault := rankBy(k.Rows, func(a, b RankRow) int { return better(a.Default.Mean, b.Default.Mean) })
	byTuned := rankBy(k.Rows, func(a, b RankRow) int { return better(a.Tuned.Mean, b.Tuned.Mean) })
	var d2 float64
	for i := range k.Rows {
		k.Rows[i].DefaultRank, k.Rows[i].TunedRank = byDefault[i], byTuned[i]
		d := float64(byDefault[i] - byTuned[i])
		d2 += d * d
		if byDefault[i] == 1 {
			k.BestDefault = k.Rows[i].Policy
		}
	}
	if n := float64(len(k.Rows)); n > 1 {
		k.Spearman = 1 - 6*d2/(n*(n*n-1))
	}
	k.lead()
	return k, nil
}

// rankBy returns each row's 1-based place in the order less gives, ties by name.
func rankBy(rows []RankRow, less func(a, b RankRow) int) []int {
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(less(rows[a], rows[b]), cmp.Compare(rows[a].Policy, rows[b].Policy))
	})
	out := make([]int, len(rows))
	for place, i := range idx {
		out[i] = place + 1
	}
	return out
}

// lead compares the tuned best with the tuned runner-up, paired.
func (k *Ranking) lead() {
	var first, second *RankRow
	for i := range k.Rows {
		switch k.Rows[i].TunedRank {
		case 1:
			first = &k.Rows[i]
		case 2:
			second = &k.Rows[i]
		}
	}
	k.BestTuned = first.Policy
	if second == nil {
		return
	}
	k.RunnerUp = second.Policy
	k.Lead, k.LeadP = stats.PairedT(first.tuned, second.tuned, !k.Objective.Maximize)
}

// Survives says in a sentence whether the pick survives tuning.
func (k Ranking) Survives() string {
	lead := fmt.Sprintf("%s over %s, tuned: %s (p = %.2g)", k.BestTuned, k.RunnerUp, formatPaired(k.Objective, k.Lead), k.LeadP)
	if k.RunnerUp == "" {
		lead = "one policy only"
	}
	if k.BestDefault == k.BestTuned {
		return fmt.Sprintf("The pick survives tuning: %s is first with defaults and tuned (rank correlation %.2f; %s).", k.BestTuned, k.Spearman, lead)
	}
	return fmt.Sprintf("Tuning changes the pick: %s is first with defaults, %s tuned (rank correlation %.2f; %s).",
		k.BestDefault, k.BestTuned, k.Spearman, lead)
}

// WriteMarkdown writes the ranking as a table, tuned order.
func (k Ranking) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Ranking with defaults and tuned\n\n%s\n\n", k.Survives())
	fmt.Fprintf(&b, "| tuned rank | default rank | policy | %s default | %s tuned | tuned vs default | verdict |\n|---|---|---|---|---|---|---|\n",
		k.Objective.Name, k.Objective.Name)
	rows := slices.Clone(k.Rows)
	slices.SortStableFunc(rows, func(a, b RankRow) int { return cmp.Compare(a.TunedRank, b.TunedRank) })
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s |\n", r.TunedRank, r.DefaultRank, r.Policy,
			formatCI(k.Objective, r.Default), formatCI(k.Objective, r.Tuned), formatPaired(k.Objective, r.Paired), r.Verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
