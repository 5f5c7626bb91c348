package tune

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"kvroute/results/stats"
)

// Num is a float that JSON writes as null when it is not finite (an unset parameter, a
// candidate the policy rejected).
type Num float64

// MarshalJSON writes the number, or null.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

func nums(xs []float64) []Num {
	out := make([]Num, len(xs))
	for i, x := range xs {
		out[i] = Num(x)
	}
	return out
}

// Result is a tune's outcome, as tune.json holds it.
type Result struct {
	// Point is the sweep point's name and label; Policy the policy's registry name.
	Point  string `json:"point"`
	Policy string `json:"policy"`
	// Base are the spec's parameters (nil: the defaults), which the search started from.
	Base      map[string]any `json:"base_params"`
	Objective Objective      `json:"objective"`
	Options   Options        `json:"options"`
	// Params are the searched parameters with their defaults, tuned values and influence.
	Params []ParamResult `json:"params"`
	Fixed  []FixedResult `json:"fixed"`
	// PlotParams are the two most influential parameters, which the plot shows.
	PlotParams []string `json:"plot_params"`
	// Candidates are every evaluated candidate; Best indexes the tuned one (0: defaults).
	Candidates []CandidateResult `json:"candidates"`
	Best       int               `json:"best"`
	// Comparison is tuned against defaults on fresh replications.
	Comparison Comparison `json:"comparison"`
	// Runs counts every simulation the tune ran.
	Runs int `json:"runs"`
}

// ParamResult is a searched parameter in the result.
type ParamResult struct {
	Key     string `json:"key"`
	Kind    Kind   `json:"kind"`
	Bounds  Bounds `json:"bounds"`
	Default Num    `json:"default"`
	Tuned   Num    `json:"tuned"`
	// Influence is the parameter's correlation ratio η² over the hypercube (Influence).
	Influence Num `json:"influence"`
}

// FixedResult is a parameter left at its value.
type FixedResult struct {
	Key    string `json:"key"`
	Kind   Kind   `json:"kind"`
	Value  Num    `json:"value"`
	Reason string `json:"reason"`
}

// CandidateResult is an evaluated candidate in the result.
type CandidateResult struct {
	Round      int   `json:"round"`
	Values     []Num `json:"values"`
	PerRep     []Num `json:"per_rep"`
	Validation []Num `json:"validation,omitempty"`
	// Score is over the search and validation replications for a finalist, the search
	// replications otherwise; SearchScore over the search replications alone.
	Score       Num `json:"score"`
	SearchScore Num `json:"search_score"`
}

// NewResult gathers a finished search and its comparison.
func NewResult(point string, s *Search, c Comparison) Result {
	r := Result{Point: point, Policy: s.Space.Policy, Base: s.Space.Base, Objective: s.Objective, Options: s.Options,
		Best: s.Best, Comparison: c, Runs: s.Runs, Params: []ParamResult{}, Fixed: []FixedResult{}, PlotParams: []string{}}
	inf := s.Influence()
	tuned := s.Tuned().Values
	for i, p := range s.Space.Params {
		r.Params = append(r.Params, ParamResult{Key: p.Key, Kind: p.Kind, Bounds: p.Bounds, Default: Num(p.Default),
			Tuned: Num(tuned[i]), Influence: Num(inf[i])})
	}
	for _, i := range TopTwo(inf) {
		r.PlotParams = append(r.PlotParams, s.Space.Params[i].Key)
	}
	for _, f := range s.Space.Fixed {
		r.Fixed = append(r.Fixed, FixedResult{Key: f.Key, Kind: f.Kind, Value: Num(f.Default), Reason: f.Reason})
	}
	for _, c := range s.Candidates {
		r.Candidates = append(r.Candidates, CandidateResult{Round: c.Round, Values: nums(c.Values), PerRep: nums(c.PerRep),
			Validation: nums(c.Validation), Score: Num(c.Score), SearchScore: Num(c.SearchScore)})
	}
	return r
}

// WriteJSON writes the result as indented JSON.
func (r Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// formatValue writes a parameter's value for a table: whole numbers for an int, seconds
// for a duration, "unset" for NaN.
func formatValue(k Kind, v Num) string {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return "unset"
	case k == KindInt:
		return strconv.FormatInt(int64(math.Round(f)), 10)
	case k == KindDuration:
		return plain(f) + " s"
	}
	return plain(f)
}

// plain writes a float with 4 significant digits, without an exponent from 1,000 up.
func plain(f float64) string {
	if math.Abs(f) >= 1000 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// Summary is the verdict in one sentence.
func (r Result) Summary() string {
	c := r.Comparison
	unit := "p99 TTFT"
	if r.Objective.Maximize {
		unit = "goodput (share of requests within the SLO)"
	}
	switch {
	case len(r.Params) == 0:
		return fmt.Sprintf("%s: no numeric parameters to search (%s %s).", r.Policy, unit, formatCI(r.Objective, c.DefaultCI))
	case c.Verdict == VerdictKept:
		return fmt.Sprintf("%s: no candidate beat the defaults on the search and validation seeds; the defaults are kept (%s %s).",
			r.Policy, unit, formatCI(r.Objective, c.DefaultCI))
	case c.Verdict == VerdictNoise:
		return fmt.Sprintf("%s: the tuned parameters are within noise of the defaults on %d fresh seeds: %s %s.",
			r.Policy, len(c.Reps), r.pairedName(), formatPaired(r.Objective, c.Paired))
	}
	return fmt.Sprintf("%s: the tuned parameters are %s than the defaults on %d fresh seeds: %s %s (p = %.2g).",
		r.Policy, c.Verdict, len(c.Reps), r.pairedName(), formatPaired(r.Objective, c.Paired), c.P)
}

func (r Result) pairedName() string {
	if r.Objective.Maximize {
		return "tuned − default"
	}
	return "tuned / default"
}

func formatCI(o Objective, iv stats.Interval) string {
	if o.Maximize {
		return fmt.Sprintf("%.3f [%.3f, %.3f]", iv.Mean, iv.Lo, iv.Hi)
	}
	return fmt.Sprintf("%.1f ms [%.1f, %.1f]", iv.Mean, iv.Lo, iv.Hi)
}

func formatPaired(o Objective, iv stats.Interval) string {
	if o.Maximize {
		return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", iv.Mean, iv.Lo, iv.Hi)
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", iv.Mean, iv.Lo, iv.Hi)
}

// WriteMarkdown writes the result as a report; plot, when not empty, is the file name of
// the objective's map over PlotParams.
func (r Result) WriteMarkdown(w io.Writer, plot string) error {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "# Tune of %s on %s\n\n%s\n\n", r.Policy, r.Point, r.Summary())
	if len(r.Params) == 0 {
		fmt.Fprintf(&b, "%s on replications %d–%d: %s.\n", r.Objective.Name, r.Comparison.Reps[0],
			r.Comparison.Reps[len(r.Comparison.Reps)-1], formatCI(r.Objective, r.Comparison.DefaultCI))
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "Objective: %s (%s). The search ran %d candidates on replications 0–%d, the same for every "+
		"candidate; its best %d, the defaults among them, also ran on replications %d–%d, and the best over both sets "+
		"was compared with the defaults on replications %d–%d, which neither used; %d simulations in all. "+
		"Intervals are 95%%.\n\n", r.Objective.Name, direction(r.Objective), len(r.Candidates), o.SearchReps-1,
		o.Finalists, o.SearchReps, o.firstFinalRep()-1, o.firstFinalRep(), o.firstFinalRep()+o.FinalReps-1, r.Runs)
	b.WriteString("| parameter | default | tuned | search range | influence (η²) |\n|---|---|---|---|---|\n")
	for _, p := range r.Params {
		scale := ""
		if p.Bounds.Log {
			scale = ", log"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s – %s%s | %s |\n", p.Key, formatValue(p.Kind, p.Default), formatValue(p.Kind, p.Tuned),
			formatValue(p.Kind, Num(p.Bounds.Lo)), formatValue(p.Kind, Num(p.Bounds.Hi)), scale, formatInfluence(p.Influence))
	}
	c := r.Comparison
	fmt.Fprintf(&b, "\n| on fresh seeds | %s |\n|---|---|\n| default | %s |\n| tuned | %s |\n| %s | %s (p = %.2g) |\n",
		r.Objective.Name, formatCI(r.Objective, c.DefaultCI), formatCI(r.Objective, c.TunedCI), r.pairedName(), formatPaired(r.Objective, c.Paired), c.P)
	if plot != "" && len(r.PlotParams) > 0 {
		fmt.Fprintf(&b, "\n![%s over %s](%s)\n\nEach point is a candidate of the search, coloured by its score on the search seeds; "+
			"the parameters shown are the two with the largest influence.\n", r.Objective.Name, strings.Join(r.PlotParams, " and "), plot)
	}
	if len(r.Fixed) > 0 {
		b.WriteString("\nNot searched:\n\n")
		for _, f := range r.Fixed {
			fmt.Fprintf(&b, "- `%s` = %s: %s\n", f.Key, formatValue(f.Kind, f.Value), f.Reason)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func direction(o Objective) string {
	if o.Maximize {
		return "higher is better"
	}
	return "lower is better; candidates are scored by the geometric mean over the seeds"
}

func formatInfluence(v Num) string {
	if math.IsNaN(float64(v)) {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(v))
}
