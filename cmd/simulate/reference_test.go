package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"testing"

	"kvroute/internal/docref"
	"kvroute/router"
	"kvroute/sweep"
)

var update = flag.Bool("update", false, "rewrite docs/reference/simulate.md")

// TestReference checks docs/reference/simulate.md against the flags and the sweep file's
// keys, and that every one has a description; -update rewrites the page.
func TestReference(t *testing.T) {
	src, err := docref.NewSources(".")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := docref.Keys(sweep.File{}, src)
	if err != nil {
		t.Fatal(err)
	}
	_, fs := newFlags(io.Discard)
	fs.Lookup("parallel").DefValue = "GOMAXPROCS" // the machine's, not the page's
	cfs, _, _ := compareFlags(io.Discard)
	calfs, _ := calibrateFlags(io.Discard)
	page := docref.Page{Path: "../../docs/reference/simulate.md", Title: "cmd/simulate reference",
		Regen: "go test ./cmd/simulate -run TestReference -update", Tables: []docref.Table{
			{Title: "Flags", Rows: docref.Flags(fs)},
			{Title: "Comparison flags (`simulate -compare` or `simulate compare`)", Intro: "Scores a simulated " +
				"run against a live one ([live.md](../live.md)).", Rows: docref.Flags(cfs)},
			{Title: "Calibration flags (`simulate -calibrate` or `simulate calibrate`)", Intro: "Fits a catalog " +
				"GPU's efficiencies to measured runs ([calibrate.md](../calibrate.md)).", Rows: docref.Flags(calfs)},
			{Title: "Sweep file (`-config`)", Intro: "YAML, decoded strictly ([sweeps.md](../sweeps.md)); `cmd/loadgen` " +
				"reads the same file. Any list of scalars under `fleet`, `workload`, `arrival` or `router` " +
				"(and `requests`, `duration`, `seed`) is a sweep axis. A sweep file has no defaults of its " +
				"own: a zero value means the default the description names. Each policy's parameters: " +
				"[policies.md](policies.md).", Rows: keys},
		}}
	if err := page.Verify(*update); err != nil {
		t.Error(err)
	}
}

// policyDefaults holds each built-in policy's parameters with their defaults, as the
// registry decodes them (router.DecodeParams, by json tag); TestPolicyReference fails when
// the registry and this list disagree, so a new policy cannot go without its page section.
var policyDefaults = map[string]any{
	"random":           router.DefaultRandomConfig(),
	"round-robin":      router.DefaultRoundRobinConfig(),
	"least-request":    router.DefaultLeastRequestConfig(),
	"power-of-two":     router.DefaultPowerOfTwoConfig(),
	"least-kv-cache":   router.DefaultLeastKVCacheConfig(),
	"session-affinity": router.DefaultSessionAffinityConfig(),
	"prefix-cache":     router.DefaultPrefixCacheConfig(),
	"prefix-tree":      router.DefaultPrefixTreeConfig(),
	"prefix-score":     router.DefaultPrefixScoreConfig(),
	"precise-prefix":   router.DefaultPrecisePrefixConfig(),
	"cache-aware":      router.DefaultCacheAwareConfig(),
	"chwbl":            router.DefaultCHWBLConfig(),
	"vtc-basic":        router.DefaultVTCConfig(),
	"lmetric":          router.DefaultLMetricConfig(),
	"kv-router":        router.DefaultKVRouterConfig(),
	"token-load":       router.DefaultTokenLoadConfig(),
	"predicted-ttft":   router.DefaultPredictedTTFTConfig(),
}

// TestPolicyReference checks docs/reference/policies.md against every built-in policy's
// parameters, and that every parameter has a description; -update rewrites the page.
func TestPolicyReference(t *testing.T) {
	src, err := docref.NewSources(".")
	if err != nil {
		t.Fatal(err)
	}
	var tables []docref.Table
	for _, info := range router.Builtin().Info() {
		cfg, ok := policyDefaults[info.Name]
		if !ok {
			t.Errorf("policy %s is registered but not in policyDefaults", info.Name)
			continue
		}
		rows, err := docref.KeysByTag(cfg, src, "json")
		if err != nil {
			t.Fatal(err)
		}
		intro := fmt.Sprintf("%s. Reproduces %s.", info.Rule, info.Source)
		if len(rows) == 0 {
			intro += " No parameters."
		}
		tables = append(tables, docref.Table{Title: "`" + info.Name + "`", Intro: intro, Rows: rows})
	}
	if len(tables) != len(policyDefaults) {
		t.Errorf("policyDefaults has %d policies, the registry %d", len(policyDefaults), len(tables))
	}
	page := docref.Page{Path: "../../docs/reference/policies.md", Title: "Policy parameters",
		Regen: "go test ./cmd/simulate -run TestPolicyReference -update", Tables: append([]docref.Table{{
			Title: "Giving parameters", Intro: "A sweep file's `policies` entries, `cmd/route`'s `policy` key and " +
				"its `-policy` flag take a policy by name (`prefix-score`) or with parameters " +
				"(`{name: prefix-score, prefix_weight: 2}`); a sweep file may list one policy several times " +
				"with different parameters. Keys not listed here are rejected. How each policy decides and " +
				"what it reproduces: [policies.md](../policies.md)."}}, tables...)}
	pd, err := pdTables(src)
	if err != nil {
		t.Fatal(err)
	}
	page.Tables = append(page.Tables, pd...)
	if err := page.Verify(*update); err != nil {
		t.Error(err)
	}
}

// deciderDefaults holds each P/D decider's parameters with their defaults, as
// router.NewDecider decodes them; pdTables fails when it and the deciders disagree, so a new
// decider cannot go without its section.
var deciderDefaults = map[string]any{
	"always":       router.AlwaysDeciderConfig{},
	"never":        router.NeverDeciderConfig{},
	"prefix-based": router.DefaultPrefixDeciderConfig(),
	"token-cap":    router.DefaultTokenCapDeciderConfig(),
}

// pdTables returns the P/D sections of the policy reference: how a P/D spec is written, one
// table per decider (every parameter documented) and the shipped profiles.
func pdTables(src *docref.Sources) ([]docref.Table, error) {
	tables := []docref.Table{{Title: "P/D specs", Intro: "A fleet split into prefill and decode pools " +
		"is routed by a P/D spec: `{name: LABEL, decider: DECIDER, prefill: POLICY, decode: POLICY}`, " +
		"each of the three a name or `{name: NAME, PARAM: VALUE, ...}`; `decider` defaults to `always`. " +
		"A plain policy runs on both pools with `always`. A shipped profile's name alone is its spec. " +
		"How the stages and the decider interact: [policies.md](../policies.md#pd-routing)."}}
	infos := router.DeciderInfos()
	if len(infos) != len(deciderDefaults) {
		return nil, fmt.Errorf("deciderDefaults has %d deciders, the router %d", len(deciderDefaults), len(infos))
	}
	for _, info := range infos {
		cfg, ok := deciderDefaults[info.Name]
		if !ok {
			return nil, fmt.Errorf("decider %s is registered but not in deciderDefaults", info.Name)
		}
		rows, err := docref.KeysByTag(cfg, src, "json")
		if err != nil {
			return nil, err
		}
		intro := fmt.Sprintf("%s. Reproduces %s.", info.Rule, info.Source)
		if len(rows) == 0 {
			intro += " No parameters."
		}
		tables = append(tables, docref.Table{Title: "decider `" + info.Name + "`", Intro: intro, Rows: rows})
	}
	for _, name := range sweep.PDProfiles() {
		pd, _ := sweep.PDProfile(name)
		spec := sweep.PolicySpec{Name: name, PD: &pd}
		v, err := spec.MarshalYAML()
		if err != nil {
			return nil, err
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		tables = append(tables, docref.Table{Title: "profile `" + name + "`", Intro: "`" + string(js) +
			"`. What it reproduces and cannot express: [policies.md](../policies.md#pd-profiles)."})
	}
	return tables, nil
}
