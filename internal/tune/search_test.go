package tune

import (
	"bytes"
	"context"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"kvroute/router"
	"kvroute/sweep"
)

// synthetic is a runner whose objective the test controls: a smooth bowl over kv-router's
// three searched parameters with its minimum at optimum, times a factor per replication
// that every candidate shares (the noise that common random numbers cancel), plus
// independent noise of relative size jitter. It records the trials it ran.
type synthetic struct {
	optimum map[string]float64
	scale   map[string]float64
	flat    bool // the parameters have no effect
	jitter  float64
	trials  []Trial
}

func (f *synthetic) run(_ context.Context, trials []Trial) ([]float64, error) {
	f.trials = append(f.trials, trials...)
	out := make([]float64, len(trials))
	for i, t := range trials {
		bowl := 1.0
		if !f.flat {
			for _, k := range slices.Sorted(maps.Keys(f.optimum)) {
				v, _ := toFloat(t.Spec.Params[k])
				d := (v - f.optimum[k]) / f.scale[k]
				bowl += d * d
			}
		}
		rep := 1 + 0.5*math.Sin(float64(t.Rep)*1.7) // shared by every candidate of a replication
		noise := 1 + f.jitter*math.Sin(float64(t.Rep)*3.1+bowl*1e3)
		out[i] = 500 * bowl * rep * noise
	}
	return out, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return math.NaN(), false
}

func kvSpace(t *testing.T) Space {
	t.Helper()
	s, err := NewSpace(router.Builtin(), sweep.PolicySpec{Name: "kv-router"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSearchFindsOptimum checks that the search lands near a known optimum, with and
// without noise that all candidates share.
func TestSearchFindsOptimum(t *testing.T) {
	optimum := map[string]float64{"overlap_score_credit": 1.4, "prefill_load_scale": 3, "router_temperature": 0.1}
	scale := map[string]float64{"overlap_score_credit": 2, "prefill_load_scale": 10, "router_temperature": 1}
	cases := []struct {
		name   string
		jitter float64
		tol    float64 // of each parameter, as a share of its range
	}{
		{"no noise", 0, 0.08},
		{"shared noise and 1% jitter", 0.01, 0.15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			space := kvSpace(t)
			f := &synthetic{optimum: optimum, scale: scale, jitter: tc.jitter}
			s, err := Run(context.Background(), space, TTFTP99, Options{Seed: 3}, f.run)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Tuned().Values
			for i, p := range space.Params {
				if d := math.Abs(got[i]-optimum[p.Key]) / (p.Hi - p.Lo); d > tc.tol {
					t.Errorf("%s = %v, want %v within %.0f%% of its range", p.Key, got[i], optimum[p.Key], tc.tol*100)
				}
			}
			if s.Best == 0 {
				t.Error("the defaults won, though they are off the optimum")
			}
		})
	}
}

// TestDefaultsRunAsGiven checks that the defaults' candidate runs and records the values
// the spec gives, where their place in the unit cube maps to others: an unset value (its
// middle) and one outside the bounds (clamped).
func TestDefaultsRunAsGiven(t *testing.T) {
	cases := []struct {
		name string
		spec sweep.PolicySpec
		only []string
	}{
		{"unset value", sweep.PolicySpec{Name: "prefix-tree"}, nil},
		{"value outside the bounds", sweep.PolicySpec{Name: "kv-router", Params: map[string]any{"overlap_score_credit": 5.0}},
			[]string{"overlap_score_credit", "prefill_load_scale"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			space, err := NewSpace(router.Builtin(), tc.spec, tc.only)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := space.Key(space.Values(defaultUnit(space))), space.Key(space.Defaults()); got == want {
				t.Fatalf("the defaults' unit point maps back to them (%s): the case tests nothing", got)
			}
			f := &synthetic{flat: true}
			s, err := Run(context.Background(), space, TTFTP99, Options{Seed: 1, SearchReps: 2, Initial: 4, Rounds: 1}, f.run)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := f.trials[0].Spec.Label(), space.Spec(space.Defaults()).Label(); got != want {
				t.Errorf("the first trial ran %s, want the defaults %s", got, want)
			}
			if diff := cmp.Diff(space.Defaults(), s.Candidates[0].Values, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("Candidates[0].Values (-defaults +got):\n%s", diff)
			}
		})
	}
}

// TestCompassStepsFromDefaults checks that when the defaults are best, the compass search's
// neighbours differ from them in one parameter each, though their place in the unit cube
// maps to other values: an unset value, one outside the bounds (chwbl's
// virtual_nodes_per_replica, 0: the variant's), one off the log scale's round trip.
func TestCompassStepsFromDefaults(t *testing.T) {
	cases := []struct {
		name string
		spec sweep.PolicySpec
	}{
		{"unset value", sweep.PolicySpec{Name: "prefix-tree"}},
		{"value outside the bounds", sweep.PolicySpec{Name: "chwbl"}},
		{"log scale", sweep.PolicySpec{Name: "token-load"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			space, err := NewSpace(router.Builtin(), tc.spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			defaults := space.Defaults()
			if differing(space.Values(defaultUnit(space)), defaults) == 0 {
				t.Fatal("the defaults' unit point maps back to them: the case tests nothing")
			}
			s, err := Run(context.Background(), space, TTFTP99, Options{Seed: 1, SearchReps: 2, Rounds: 1}, offDefaults(space))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range s.Candidates {
				if c.Round != 1 {
					continue
				}
				n++
				if d := differing(defaults, c.Values); d != 1 {
					t.Errorf("neighbour %s differs from the defaults %s in %d parameters, want 1", space.Key(c.Values), space.Key(defaults), d)
				}
			}
			if n == 0 {
				t.Error("the compass search evaluated no neighbours")
			}
		})
	}
}

// offDefaults is a runner whose objective counts the parameters a trial sets otherwise
// than the defaults do: they are the best candidate.
func offDefaults(space Space) Runner {
	want := space.Spec(space.Defaults()).Params
	return func(_ context.Context, trials []Trial) ([]float64, error) {
		out := make([]float64, len(trials))
		for i, t := range trials {
			out[i] = 500
			for _, p := range space.Params {
				if !reflect.DeepEqual(t.Spec.Params[p.Key], want[p.Key]) { // a missing key: nil
					out[i] += 500
				}
			}
		}
		return out, nil
	}
}

// differing counts the values of a and b that differ (two NaN are equal).
func differing(a, b []float64) int {
	n := 0
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			n++
		}
	}
	return n
}

// TestPairedSeeds checks that every search candidate runs on the same replications, the
// finalists, defaults among them, on the same validation replications after those, and
// that the comparison pairs tuned and defaults on fresh ones neither used.
func TestPairedSeeds(t *testing.T) {
	f := &synthetic{optimum: map[string]float64{"overlap_score_credit": 0.5}, scale: map[string]float64{"overlap_score_credit": 1}}
	opts := Options{Seed: 1, SearchReps: 3, ValidationReps: 2, Finalists: 3, FinalReps: 4, Initial: 6, Rounds: 3}
	s, err := Run(context.Background(), kvSpace(t), TTFTP99, opts, f.run)
	if err != nil {
		t.Fatal(err)
	}
	searchTrials := len(f.trials)
	byCandidate := map[string][]int{}
	for _, tr := range f.trials {
		byCandidate[tr.Spec.Label()] = append(byCandidate[tr.Spec.Label()], tr.Rep)
	}
	defaults := s.Space.Spec(s.Space.Defaults()).Label()
	finalists := 0
	for label, reps := range byCandidate {
		switch {
		case slices.Equal(reps, []int{0, 1, 2, 3, 4}):
			finalists++
		case label == defaults || !slices.Equal(reps, []int{0, 1, 2}):
			t.Errorf("candidate %s ran on replications %v, want [0 1 2], or [0 1 2 3 4] for a finalist", label, reps)
		}
	}
	if finalists != 3 || !slices.Equal(byCandidate[defaults], []int{0, 1, 2, 3, 4}) {
		t.Errorf("%d finalists (defaults on %v), want 3 with the defaults", finalists, byCandidate[defaults])
	}
	if v := s.Tuned().Validation; len(v) != 2 {
		t.Errorf("the tuned candidate has %d validation values, want 2", len(v))
	}
	c, err := Compare(context.Background(), s, f.run)
	if err != nil {
		t.Fatal(err)
	}
	final := f.trials[searchTrials:]
	want := []int{5, 6, 7, 8}
	var def, tuned []int
	for _, tr := range final {
		if tr.Spec.Label() == defaults {
			def = append(def, tr.Rep)
		} else {
			tuned = append(tuned, tr.Rep)
		}
	}
	if !slices.Equal(def, want) || !slices.Equal(tuned, want) {
		t.Errorf("comparison replications: defaults %v, tuned %v, want both %v", def, tuned, want)
	}
	if !slices.Equal(c.Reps, want) {
		t.Errorf("Comparison.Reps = %v, want %v", c.Reps, want)
	}
	if s.Runs != len(f.trials) {
		t.Errorf("Runs = %d, the runner ran %d", s.Runs, len(f.trials))
	}
	if max := opts.MaxRuns(3); s.Runs > max {
		t.Errorf("Runs = %d, above MaxRuns %d", s.Runs, max)
	}
}

// TestVerdicts checks the comparison's verdict against objectives with a known answer.
func TestVerdicts(t *testing.T) {
	far := map[string]float64{"overlap_score_credit": 0.2, "prefill_load_scale": 8}
	scale := map[string]float64{"overlap_score_credit": 1, "prefill_load_scale": 3}
	cases := []struct {
		name string
		f    *synthetic
		want []string
	}{
		{"optimum away from the defaults", &synthetic{optimum: far, scale: scale}, []string{VerdictBetter}},
		{"parameters without effect", &synthetic{flat: true, jitter: 0.05, scale: scale}, []string{VerdictKept, VerdictNoise, VerdictWorse}},
		{"optimum at the defaults", &synthetic{optimum: map[string]float64{"overlap_score_credit": 1, "prefill_load_scale": 1, "router_temperature": 0},
			scale: map[string]float64{"overlap_score_credit": 1, "prefill_load_scale": 1, "router_temperature": 1}}, []string{VerdictKept}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Run(context.Background(), kvSpace(t), TTFTP99, Options{Seed: 2}, tc.f.run)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Compare(context.Background(), s, tc.f.run)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tc.want, c.Verdict) {
				t.Errorf("verdict %q, want one of %v (paired %+v)", c.Verdict, tc.want, c.Paired)
			}
			if c.Verdict == VerdictBetter && c.Paired.Hi >= 1 {
				t.Errorf("better, but the ratio's interval %+v reaches 1", c.Paired)
			}
		})
	}
}

// TestDeterminism checks that the same seed gives the same result bytes and that the
// seed matters.
func TestDeterminism(t *testing.T) {
	out := func(seed uint64) []byte {
		f := &synthetic{optimum: map[string]float64{"overlap_score_credit": 0.5, "prefill_load_scale": 2},
			scale: map[string]float64{"overlap_score_credit": 1, "prefill_load_scale": 5}}
		s, err := Run(context.Background(), kvSpace(t), TTFTP99, Options{Seed: seed}, f.run)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compare(context.Background(), s, f.run)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		r := NewResult("p", s, c)
		if err := r.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteMarkdown(&b, "map.png"); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := out(5), out(5)
	if !bytes.Equal(a, b) {
		t.Error("the same seed gave different output")
	}
	if bytes.Equal(a, out(6)) {
		t.Error("another seed gave the same output: the seed does not reach the hypercube")
	}
}

// TestInfluence checks that the parameter the objective depends on most ranks first.
func TestInfluence(t *testing.T) {
	f := &synthetic{optimum: map[string]float64{"prefill_load_scale": 0.1, "router_temperature": 0},
		scale: map[string]float64{"prefill_load_scale": 1, "router_temperature": 10}}
	s, err := Run(context.Background(), kvSpace(t), TTFTP99, Options{Seed: 4, Initial: 30, Rounds: 1}, f.run)
	if err != nil {
		t.Fatal(err)
	}
	inf := s.Influence()
	top := TopTwo(inf)
	if got := s.Space.Params[top[0]].Key; got != "prefill_load_scale" {
		t.Errorf("most influential: %s, want prefill_load_scale (η² %v)", got, inf)
	}
	for i, v := range inf {
		if v < 0 || v > 1 {
			t.Errorf("influence[%d] = %v, want within [0, 1]", i, v)
		}
	}
}

func TestNoParameters(t *testing.T) {
	space, err := NewSpace(router.Builtin(), sweep.PolicySpec{Name: "random"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &synthetic{flat: true}
	s, err := Run(context.Background(), space, TTFTP99, Options{}, f.run)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Candidates) != 1 || s.Best != 0 {
		t.Errorf("%d candidates, best %d: want the defaults alone", len(s.Candidates), s.Best)
	}
	if _, err := Compare(context.Background(), s, f.run); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Runs, (Options{}).MaxRuns(0); got != want {
		t.Errorf("Runs = %d, want MaxRuns(0) = %d", got, want)
	}
}

// lucky is a runner whose parameters have no effect except in one region, which scores
// well on the search replications and badly on every later one: the winner's curse.
func lucky(searchReps int) Runner {
	return func(_ context.Context, trials []Trial) ([]float64, error) {
		out := make([]float64, len(trials))
		for i, t := range trials {
			v, _ := toFloat(t.Spec.Params["overlap_score_credit"])
			out[i] = 500 * (1 + 0.1*math.Sin(float64(t.Rep)))
			if v > 1.5 && t.Rep < searchReps {
				out[i] *= 0.5
			} else if v > 1.5 {
				out[i] *= 3
			}
		}
		return out, nil
	}
}

// TestValidationRejectsLuck checks that a region that wins only on the search seeds does
// not become the tuned values: the validation replications reveal it.
func TestValidationRejectsLuck(t *testing.T) {
	run := lucky(10)
	s, err := Run(context.Background(), kvSpace(t), TTFTP99, Options{Seed: 1}, run)
	if err != nil {
		t.Fatal(err)
	}
	if v := s.Tuned().Values[0]; v > 1.5 {
		t.Errorf("tuned overlap_score_credit %v: the lucky region won", v)
	}
	c, err := Compare(context.Background(), s, run)
	if err != nil {
		t.Fatal(err)
	}
	if c.Verdict == VerdictWorse {
		t.Errorf("verdict %q: the validation let a lucky candidate through", c.Verdict)
	}
}
