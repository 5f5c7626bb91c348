package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/sweep"
)

// tuneConfig is the sweep file of the -tune tests.
const tuneConfig = "testdata/tune.yaml"

// smallTune are the flags of a small tune of kv-router's two main parameters.
func smallTune(out string) []string {
	return []string{"-config", tuneConfig, "-point", "rate=12", "-tune", "kv-router", "-tune-params", "overlap_score_credit,prefill_load_scale",
		"-tune-reps", "2", "-tune-final-reps", "2", "-tune-initial", "3", "-tune-rounds", "1", "-out", out, "-quiet"}
}

var tuneFiles = []string{"kv-router/tune.json", "kv-router/tune.md", "kv-router/objective-map.png"}

// TestTuneDeterministic runs a small tune twice, with different parallelism: every file is
// written, and the same flags give the same bytes. A third run in the same folder reads
// every trial back: it simulates nothing and writes the same result.
func TestTuneDeterministic(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	stdout, _ := runSim(t, smallTune(a)...)
	runSim(t, append(smallTune(b), "-parallel", "1")...)
	if !strings.Contains(stdout, "kv-router: ") {
		t.Errorf("stdout lacks the verdict:\n%s", stdout)
	}
	for _, f := range tuneFiles {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil || len(x) == 0 {
			t.Fatalf("%s: %v (%d bytes)", f, err, len(x))
		}
		if y, _ := os.ReadFile(filepath.Join(b, f)); !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs of the same flags", f)
		}
	}
	trials, _ := os.ReadFile(filepath.Join(a, "kv-router", "trials.jsonl"))
	first, _ := os.ReadFile(filepath.Join(a, tuneFiles[0]))
	runSim(t, smallTune(a)...)
	after, _ := os.ReadFile(filepath.Join(a, "kv-router", "trials.jsonl"))
	again, _ := os.ReadFile(filepath.Join(a, tuneFiles[0]))
	if !bytes.Equal(first, again) {
		t.Error("the resumed tune wrote another result")
	}
	if !bytes.Equal(trials, after) {
		t.Error("the resumed tune simulated trials it had cached")
	}
}

// TestTuneShards runs a tune as two shards, each run again until the search is done (as
// an Indexed Job's pods would be), and checks that the result is the unsharded run's,
// byte for byte, with every trial simulated once.
func TestTuneShards(t *testing.T) {
	whole, sharded := filepath.Join(t.TempDir(), "whole"), filepath.Join(t.TempDir(), "sharded")
	runSim(t, smallTune(whole)...)
	for pass := 0; ; pass++ {
		if _, err := os.Stat(filepath.Join(sharded, tuneFiles[0])); err == nil {
			break
		}
		if pass > 40 {
			t.Fatal("the shards did not finish the search in 40 passes")
		}
		for _, sh := range []string{"0/2", "1/2"} {
			runSim(t, append(smallTune(sharded), "-shard", sh)...)
		}
	}
	for _, f := range tuneFiles {
		x, _ := os.ReadFile(filepath.Join(whole, f))
		if y, _ := os.ReadFile(filepath.Join(sharded, f)); !bytes.Equal(x, y) {
			t.Errorf("%s: the sharded tune differs from the unsharded one", f)
		}
	}
	count := func(glob string) int {
		files, _ := filepath.Glob(filepath.Join(glob))
		n := 0
		for _, f := range files {
			data, _ := os.ReadFile(f)
			n += bytes.Count(data, []byte("\n"))
		}
		return n
	}
	if w, s := count(filepath.Join(whole, "kv-router", "trials*.jsonl")), count(filepath.Join(sharded, "kv-router", "trials-*-of-2.jsonl")); w != s || w == 0 {
		t.Errorf("trials: %d unsharded, %d across the shards: want the same, each once", w, s)
	}
}

func TestSelectPoint(t *testing.T) {
	points, err := sweep.Parse(defaultConfig, "default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		label, want, wantErr string
	}{
		{"rate=30", "rate=30", ""},
		{"0", "rate=8", ""},
		{"", "", "pick one with -point"},
		{"rate=31", "", "no such point"},
	}
	for _, tc := range cases {
		t.Run(tc.label, func(t *testing.T) {
			p, err := selectPoint(points, tc.label)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || p.Label() != tc.want {
				t.Fatalf("selectPoint(%q) = %s, %v; want %s", tc.label, p.Label(), err, tc.want)
			}
		})
	}
}

func TestTuneSpecs(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"kv-router", []string{"kv-router"}, false},
		{"kv-router, prefix-score", []string{"kv-router", "prefix-score"}, false},
		{"{name: kv-router, router_temperature: 0.1}", []string{"kv-router,router_temperature=0.1"}, false},
		{"no-such", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			specs, err := tuneSpecs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			var got []string
			for _, s := range specs {
				got = append(got, s.Label())
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("specs (-want +got):\n%s", diff)
			}
		})
	}
	all, err := tuneSpecs("all")
	if err != nil || len(all) < 10 {
		t.Errorf("all: %d specs, %v", len(all), err)
	}
}

// TestTuneSpace checks how -tune-params is read: names separated by commas, with spaces
// around them and empty entries ignored; none for the default set.
func TestTuneSpace(t *testing.T) {
	cases := []struct {
		name, params string
		want         []string
		wantErr      bool
	}{
		{"none: the default set", "", []string{"overlap_score_credit", "prefill_load_scale", "router_temperature"}, false},
		{"blank", " ", []string{"overlap_score_credit", "prefill_load_scale", "router_temperature"}, false},
		{"one", "prefill_load_scale", []string{"prefill_load_scale"}, false},
		{"two", "overlap_score_credit,prefill_load_scale", []string{"overlap_score_credit", "prefill_load_scale"}, false},
		{"spaces", " overlap_score_credit , prefill_load_scale ", []string{"overlap_score_credit", "prefill_load_scale"}, false},
		{"empty entries", "overlap_score_credit,,host_cache_hit_weight,", []string{"overlap_score_credit", "host_cache_hit_weight"}, false},
		{"unknown", "overlap_score_credit, nope", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			space, err := tuneSpace(sweep.PolicySpec{Name: "kv-router"}, tc.params)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			var got []string
			for _, p := range space.Params {
				got = append(got, p.Key)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("searched (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanTune checks that -plan with -tune sizes the space the tune searches: the
// parameters -tune-params names, and at most the runs the tune takes.
func TestPlanTune(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	flags := smallTune(out)
	for i, f := range flags {
		if f == "-tune-params" {
			flags[i+1] = "overlap_score_credit, prefill_load_scale"
		}
	}
	plan, _ := runSim(t, append(flags, "-plan", "-plan-wall", "1h")...)
	var dim, maxRuns int
	if _, err := fmt.Sscanf(plan, "kv-router: %d parameters, at most %d runs", &dim, &maxRuns); err != nil {
		t.Fatalf("-plan output: %v\n%s", err, plan)
	}
	runSim(t, flags...)
	data, err := os.ReadFile(filepath.Join(out, tuneFiles[0]))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Params []struct{ Key string }
		Runs   int
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if dim != 2 || len(r.Params) != dim {
		t.Errorf("-plan sized %d parameters, the tune searched %d: want 2, as -tune-params names", dim, len(r.Params))
	}
	if r.Runs == 0 || r.Runs > maxRuns {
		t.Errorf("the tune ran %d simulations, -plan said at most %d", r.Runs, maxRuns)
	}
}
