package tune

import (
	"bytes"
	"strings"
	"testing"
)

// result is a Result with only what Rank reads: per-seed objective values on shared fresh
// replications, defaults and tuned.
func result(policy string, def, tuned []float64) Result {
	c := Comparison{Reps: []int{5, 6, 7, 8}, Default: def, Tuned: tuned}
	c.summarise(TTFTP99, false)
	return Result{Policy: policy, Objective: TTFTP99, Comparison: c}
}

func TestRank(t *testing.T) {
	a := result("a", []float64{100, 110, 120, 105}, []float64{100, 110, 120, 105})
	b := result("b", []float64{150, 160, 170, 155}, []float64{80, 85, 90, 82})
	c := result("c", []float64{300, 310, 320, 305}, []float64{290, 300, 310, 295})
	cases := []struct {
		name        string
		in          []Result
		bestDefault string
		bestTuned   string
		survives    bool
	}{
		{"tuning changes the pick", []Result{a, b, c}, "a", "b", false},
		{"the pick survives", []Result{a, c}, "a", "a", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Rank(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if k.BestDefault != tc.bestDefault || k.BestTuned != tc.bestTuned {
				t.Errorf("best %s with defaults, %s tuned; want %s, %s", k.BestDefault, k.BestTuned, tc.bestDefault, tc.bestTuned)
			}
			if got := strings.HasPrefix(k.Survives(), "The pick survives"); got != tc.survives {
				t.Errorf("Survives() = %q", k.Survives())
			}
			if tc.survives && k.Spearman != 1 {
				t.Errorf("Spearman %v, want 1 for the same order", k.Spearman)
			}
			var md bytes.Buffer
			if err := k.WriteMarkdown(&md); err != nil || strings.Count(md.String(), "\n| ") != len(tc.in)+1 {
				t.Errorf("markdown (%v):\n%s", err, md.String())
			}
		})
	}
	k, _ := Rank([]Result{a, b})
	if !(k.Lead.Hi < 1) || k.LeadP > 0.05 {
		t.Errorf("b's tuned lead over a: %+v p %v, want a ratio below 1 that excludes it", k.Lead, k.LeadP)
	}
	other := b
	other.Comparison.Reps = []int{1, 2, 3, 4}
	if _, err := Rank([]Result{a, other}); err == nil {
		t.Error("Rank accepted results on other replications")
	}
}

func TestSummarise(t *testing.T) {
	cases := []struct {
		name       string
		obj        Objective
		def, tuned []float64
		kept       bool
		want       string
	}{
		{"lower latency", TTFTP99, []float64{100, 120, 110}, []float64{80, 97, 88}, false, VerdictBetter},
		{"higher latency", TTFTP99, []float64{100, 120, 110}, []float64{120, 146, 131}, false, VerdictWorse},
		{"mixed", TTFTP99, []float64{100, 120, 110}, []float64{90, 130, 110}, false, VerdictNoise},
		{"more goodput", GoodputFraction, []float64{0.5, 0.6, 0.55}, []float64{0.6, 0.71, 0.64}, false, VerdictBetter},
		{"less goodput", GoodputFraction, []float64{0.5, 0.6, 0.55}, []float64{0.4, 0.5, 0.44}, false, VerdictWorse},
		{"kept", TTFTP99, []float64{100, 120}, []float64{100, 120}, true, VerdictKept},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Comparison{Default: tc.def, Tuned: tc.tuned}
			c.summarise(tc.obj, tc.kept)
			if c.Verdict != tc.want {
				t.Errorf("verdict %q, want %q (paired %+v)", c.Verdict, tc.want, c.Paired)
			}
		})
	}
}
