package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sweep"
)

// fragments reads the shared vocabulary's one-line fragments, by concept.
func fragments(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "sweep", "testdata", "vocabulary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}

// vocabularySweep is a sweep file made of the fragments, as cmd/simulate reads it.
func vocabularySweep(f map[string]string) string {
	return "name: vocabulary\nrequests: 1\nseed: " + f["seed"] +
		"\nfleet: {replicas: " + f["replicas"] + ", " + strings.TrimPrefix(f["replica"], "{") +
		"\nworkload: {kind: shared-prefix, groups: 1, prompts_per_group: 1, system_prompt_tokens: 16, question_tokens: 16, output_tokens: 4}" +
		"\narrival: {process: poisson, rate: 1}" +
		"\nrouter: {metrics_interval: " + f["metrics_interval"] + ", max_retries: " + f["max_retries"] + "}" +
		"\npolicies: [" + f["policy"] + "]\n"
}

// TestVocabularySweepAndRoute decodes the same fragments as a sweep file and as a route
// config, and checks that the router gets the simulator's policy, parameters, policy seed,
// metrics interval, retries and replica. cmd/emulate's vocabulary test does the same for the
// emulator.
func TestVocabularySweepAndRoute(t *testing.T) {
	f := fragments(t)
	points, err := sweep.Parse([]byte(vocabularySweep(f)), "vocabulary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := points[0]
	route := writeFile(t, "route.yaml", "seed: "+f["seed"]+"\npolicy: "+f["policy"]+
		"\nbackends: [a=http://a:8000]\nhealth: {metrics_interval: "+f["metrics_interval"]+"}\nlimits: {max_retries: "+f["max_retries"]+
		"}\nhardware:\n  a: "+f["replica"]+"\n")
	o, err := parseFlags([]string{"-config", route}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.load()
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gateway
	if diff := cmp.Diff(p.Policies[0], sweep.PolicySpec{Name: g.Policy, Params: g.PolicyParams}); diff != "" {
		t.Errorf("policy (-sweep +route):\n%s", diff)
	}
	if g.Seed != p.RouterSeed() || c.Seed != p.Seed {
		t.Errorf("seeds: route %d (policy %d), sweep %d (router %d)", c.Seed, g.Seed, p.Seed, p.RouterSeed())
	}
	if g.Health.MetricsInterval != p.Router.MetricsInterval || p.Router.MaxRetries == nil || g.Limits.MaxRetries != *p.Router.MaxRetries {
		t.Errorf("metrics interval %v, retries %d; sweep %v, %v", g.Health.MetricsInterval, g.Limits.MaxRetries, p.Router.MetricsInterval, p.Router.MaxRetries)
	}
	if diff := cmp.Diff(p.Fleet.ReplicaConfig, c.Hardware["a"]); diff != "" {
		t.Errorf("replica (-sweep fleet +route hardware):\n%s", diff)
	}
	checkPricedAsSimulated(t, p.Fleet, g.Prefill["a"])
	if _, err := router.Builtin().New(g.Policy, g.PolicyParams, g.Seed); err != nil {
		t.Errorf("the router cannot build the sweep's policy: %v", err)
	}
}

// checkPricedAsSimulated checks that the router's step-time model of a backend is the one of
// the simulator's replica.
func checkPricedAsSimulated(t *testing.T, fl sweep.FleetConfig, got router.PrefillPredictor) {
	t.Helper()
	reps, err := fl.Engines(gpumodel.DefaultCatalog(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	want, err := gpumodel.NewPrefillPredictor(reps[0].Deployment)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{16, 512, 4096} {
		if got == nil || got.PrefillTime(n, 0, 0, 0) != want.PrefillTime(n, 0, 0, 0) {
			t.Fatalf("%d-token prefill priced %v, simulated %v", n, got, want.PrefillTime(n, 0, 0, 0))
		}
	}
}

// TestVocabularyDefaults holds the defaults the vocabulary says are shared to one value.
func TestVocabularyDefaults(t *testing.T) {
	g := gateway.DefaultConfig()
	if g.Limits.MaxRetries != cluster.DefaultMaxRetries {
		t.Errorf("max_retries: router %d, simulator %d", g.Limits.MaxRetries, cluster.DefaultMaxRetries)
	}
	if g.Health.MetricsInterval != cluster.DefaultMetricsInterval {
		t.Errorf("metrics_interval: router %v, the simulator's live default %v", g.Health.MetricsInterval, cluster.DefaultMetricsInterval)
	}
	if e := emulate.DefaultConfig(); g.Limits.MaxBodyBytes != e.MaxBodyBytes {
		t.Errorf("max_body_bytes: router %d, emulator %d", g.Limits.MaxBodyBytes, e.MaxBodyBytes)
	}
	if d := defaultFileConfig(); d.Seed != 0 {
		t.Errorf("default seed %d: want 0, a sweep file's default", d.Seed)
	}
}
