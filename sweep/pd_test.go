package sweep

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"kvroute/router"
)

func TestParsePDSpec(t *testing.T) {
	tests := []struct {
		name, in string
		want     PolicySpec
		wantErr  string
	}{
		{"per-stage spec", "{name: mine, decider: {name: prefix-based, non_cached_tokens: 8}, prefill: kv-router, decode: {name: kv-router, overlap_score_credit: 0}}",
			PolicySpec{Name: "mine", PD: &PDSpec{
				Decider: PolicySpec{Name: "prefix-based", Params: map[string]any{"non_cached_tokens": 8}},
				Prefill: PolicySpec{Name: "kv-router"},
				Decode:  PolicySpec{Name: "kv-router", Params: map[string]any{"overlap_score_credit": 0}}}}, ""},
		{"decider defaults to always", "{name: pair, prefill: cache-aware, decode: cache-aware}",
			PolicySpec{Name: "pair", PD: &PDSpec{Decider: PolicySpec{Name: "always"},
				Prefill: PolicySpec{Name: "cache-aware"}, Decode: PolicySpec{Name: "cache-aware"}}}, ""},
		{"a profile by name", "dynamo-pd", PolicySpec{Name: "dynamo-pd", PD: &PDSpec{
			Decider: PolicySpec{Name: "always"}, Prefill: PolicySpec{Name: "kv-router"},
			Decode: PolicySpec{Name: "kv-router", Params: map[string]any{"overlap_score_credit": 0}}}}, ""},
		{"a profile as a mapping", "{name: sglang-pd}", PolicySpec{Name: "sglang-pd", PD: &PDSpec{
			Decider: PolicySpec{Name: "always"}, Prefill: PolicySpec{Name: "cache-aware"},
			Decode: PolicySpec{Name: "cache-aware"}}}, ""},
		{"a profile's name over an explicit spec", "{name: dynamo-pd, prefill: random, decode: random}",
			PolicySpec{Name: "dynamo-pd", PD: &PDSpec{Decider: PolicySpec{Name: "always"},
				Prefill: PolicySpec{Name: "random"}, Decode: PolicySpec{Name: "random"}}}, ""},
		{"no decode", "{name: x, prefill: random}", PolicySpec{}, "needs prefill and decode"},
		{"unknown P/D key", "{name: x, prefill: random, decode: random, extra: 1}", PolicySpec{}, `P/D key "extra"`},
		{"stage not a spec", "{name: x, prefill: 5, decode: random}", PolicySpec{}, "prefill: want a name or a mapping"},
		{"stage without a name", "{name: x, prefill: {block_size: 1}, decode: random}", PolicySpec{}, "needs a name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicySpec([]byte(tc.in))
			checkParsed(t, got, err, tc.want, tc.wantErr)
		})
	}
}

// TestPDProfilesBuild builds every shipped profile and checks the rule each stands for.
func TestPDProfilesBuild(t *testing.T) {
	want := map[string]struct{ decider, prefill, decode string }{
		"llm-d-pd":              {"prefix-based", "prefix-score", "prefix-score"},
		"llm-d-pd-guide":        {"always", "token-load", "least-request"},
		"dynamo-pd":             {"always", "kv-router", "kv-router"},
		"dynamo-pd-conditional": {"token-cap", "kv-router", "kv-router"},
		"sglang-pd":             {"always", "cache-aware", "cache-aware"},
	}
	if diff := cmp.Diff(len(want), len(PDProfiles())); diff != "" {
		t.Fatalf("profiles %v (-want +got):\n%s", PDProfiles(), diff)
	}
	reg := router.Builtin()
	for _, name := range PDProfiles() {
		spec, err := ParsePolicySpec([]byte(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := spec.Check(reg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := spec.BuildPD(reg, 7)
		if err != nil {
			t.Fatal(err)
		}
		got := struct{ decider, prefill, decode string }{p.Decider.Name(), p.Prefill.Name(), p.Decode.Name()}
		if got != want[name] {
			t.Errorf("%s: %+v, want %+v", name, got, want[name])
		}
	}
}

// TestPDProfileIsACopy checks that changing a profile's spec leaves the shipped one alone.
func TestPDProfileIsACopy(t *testing.T) {
	a, _ := PDProfile("llm-d-pd")
	a.Decode.Params["prefix_weight"] = 99
	a.Decider.Name = "never"
	b, _ := PDProfile("llm-d-pd")
	if b.Decode.Params["prefix_weight"] != 2 || b.Decider.Name != "prefix-based" {
		t.Fatalf("the shipped profile changed: %+v", b)
	}
}

// TestPDProfileDeciders checks that each profile's decider decides as its upstream does on
// one request: llm-d's disaggregates 16 uncached tokens and not 15, Dynamo's conditional one
// keeps 5000 net-new tokens local and not 5001, the others always disaggregate.
func TestPDProfileDeciders(t *testing.T) {
	tests := []struct {
		profile        string
		prompt, cached int
		wantRemote     bool
	}{
		{"llm-d-pd", 100, 84, true},
		{"llm-d-pd", 100, 85, false},
		{"dynamo-pd-conditional", 6000, 1000, false},
		{"dynamo-pd-conditional", 6001, 1000, true},
		{"dynamo-pd", 10, 10, true},
		{"sglang-pd", 10, 10, true},
		{"llm-d-pd-guide", 10, 10, true},
	}
	reg := router.Builtin()
	for _, tc := range tests {
		spec, _ := ParsePolicySpec([]byte(tc.profile))
		p, err := spec.BuildPD(reg, 1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := p.Decider.Disaggregate(&router.Request{InputTokens: tc.prompt}, tc.cached)
		if got != tc.wantRemote {
			t.Errorf("%s, prompt %d, cached %d: remote %v, want %v", tc.profile, tc.prompt, tc.cached, got, tc.wantRemote)
		}
	}
}

func TestPDSpecCheck(t *testing.T) {
	reg := router.Builtin()
	for in, wantErr := range map[string]string{
		"{name: x, decider: nope, prefill: random, decode: random}":                                       "unknown decider",
		"{name: x, prefill: nope, decode: random}":                                                        "prefill",
		"{name: x, prefill: random, decode: {name: kv-router, overlap_score_credit: -1}}":                 "decode",
		"{name: x, decider: {name: token-cap, bypass_below_tokens: -1}, prefill: random, decode: random}": "bypass_below_tokens",
		"{name: llm-d-pd, non_cached_tokens: 8}":                                                          "takes no parameters",
	} {
		spec, err := ParsePolicySpec([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if err := spec.Check(reg); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want an error mentioning %q", in, err, wantErr)
		}
	}
}

// FuzzParsePDSpec: whatever ParsePolicySpec accepts as a P/D spec reads back whole (decider,
// both stages, every parameter) from its own YAML, and a profile's name alone resolves to
// the profile.
func FuzzParsePDSpec(f *testing.F) {
	for _, s := range []string{"llm-d-pd", "{name: sglang-pd}",
		"{name: m, decider: {name: prefix-based, non_cached_tokens: 8}, prefill: kv-router, decode: {name: kv-router, overlap_score_credit: 0}}",
		`{"name":"p","prefill":"random","decode":{"name":"x","y":[1,2]}}`, "{name: p, decider: never, prefill: a, decode: b}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParsePolicySpec(data)
		if err != nil || spec.PD == nil {
			return
		}
		out, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal %+v: %v", spec, err)
		}
		back, err := ParsePolicySpec(out)
		if err != nil {
			t.Fatalf("%q read, its YAML %q not: %v", data, out, err)
		}
		if diff := cmp.Diff(spec, back); diff != "" {
			t.Fatalf("%q: round trip through %q (-first +second):\n%s", data, out, diff)
		}
	})
}

// TestSweepNamesPDProfiles checks that a sweep file lists shipped profiles and per-stage specs
// beside plain policies, and that its validation builds each stage.
func TestSweepNamesPDProfiles(t *testing.T) {
	src := strings.Replace(file, "policies: [round-robin, {name: prefix-cache, block_size: 64}]",
		"policies: [llm-d-pd, round-robin, {name: mine, decider: never, prefill: random, decode: least-request}]", 1)
	points, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ps := points[0].Policies
	if ps[0].PD == nil || ps[0].PD.Decider.Name != "prefix-based" || ps[1].PD != nil || ps[2].PD.Decode.Name != "least-request" {
		t.Fatalf("policies %+v: want the llm-d-pd profile, round-robin, then mine", ps)
	}
	bad := strings.Replace(src, "prefill: random", "prefill: nope", 1)
	if _, err = Parse([]byte(bad), "t.yaml"); err == nil || !strings.Contains(err.Error(), "prefill") {
		t.Fatalf("an unknown prefill policy: %v, want an error naming the stage", err)
	}
}
