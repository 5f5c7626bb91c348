package workloads

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	w := c.Workload
	got := []int{w.Groups, w.PromptsPerGroup, w.SystemPromptTokens, w.QuestionTokens, w.OutputTokens}
	if diff := cmp.Diff([]int{64, 16, 2048, 128, 256}, got); diff != "" {
		t.Errorf("SGLang defaults (-want +got):\n%s", diff)
	}
	if c.Arrival.Process != ProcessPoisson || c.Arrival.Rate != 10 {
		t.Errorf("arrival = %+v, want poisson at 10/s", c.Arrival)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Config
	}{
		{
			name: "simulate-shape",
			yaml: "workload: {kind: shared-prefix, groups: 64, prompts_per_group: 16, system_prompt_tokens: 2048, question_tokens: 128, output_tokens: 256}\n" +
				"arrival: {process: poisson, rate: 10}\nrequests: 500\nduration: 10m\n",
			want: Config{
				Workload: WorkloadConfig{Kind: KindSharedPrefix, Groups: 64, PromptsPerGroup: 16,
					SystemPromptTokens: 2048, QuestionTokens: 128, OutputTokens: 256},
				Arrival:  ArrivalConfig{Process: ProcessPoisson, Rate: 10},
				Requests: 500, Duration: 10 * time.Minute,
			},
		},
		{name: "empty", yaml: "", want: Config{}},
		{
			name: "mix",
			yaml: "workload:\n  kind: mix\n  tenants:\n  - {name: a, weight: 2, workload: {kind: synthetic-chat, think_time: 2s}}\n" +
				"  - {name: flood, workload: {kind: shared-prefix, preset: inference-perf}, arrival: {process: gamma, rate: 50, burstiness: 0.5}}\n",
			want: Config{Workload: WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{
				{Name: "a", Weight: 2, Workload: WorkloadConfig{Kind: KindSyntheticChat, ThinkTime: 2 * time.Second}},
				{Name: "flood", Workload: WorkloadConfig{Kind: KindSharedPrefix, Preset: PresetInferencePerf},
					Arrival: &ArrivalConfig{Process: ProcessGamma, Rate: 50, Burstiness: 0.5}},
			}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig(tc.name+".yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseConfig (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{name: "unknown-field", yaml: "workload: {kind: shared-prefix, group: 3}\n", want: "field group not found"},
		{name: "wrong-type", yaml: "workload: {groups: many}\n", want: "cannot unmarshal"},
		{name: "integer-duration", yaml: "duration: 600\n", want: "cannot unmarshal"},
		{name: "two-documents", yaml: "requests: 1\n---\nrequests: 2\n", want: "one YAML document"},
		{name: "syntax", yaml: "workload: [\n", want: "bad.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrMalformed) {
				t.Errorf("ParseConfig error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	yes := true
	tests := []struct {
		name  string
		cfg   Config
		wants []string
	}{
		{name: "unknown-kind", cfg: Config{Workload: WorkloadConfig{Kind: "lmsys"}}, wants: []string{"workload.kind"}},
		{name: "negative", cfg: Config{Workload: WorkloadConfig{Groups: -1, OutputTokens: -5}, Requests: -1, Duration: -time.Second},
			wants: []string{"workload.groups", "workload.output_tokens", "requests", "duration"}},
		{name: "field-of-other-kind", cfg: Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: "x", Groups: 3, Repeat: &yes}},
			wants: []string{"workload.groups: not used by kind sharegpt", "workload.repeat"}},
		{name: "think-single-turn", cfg: Config{Workload: WorkloadConfig{ThinkTime: time.Second}},
			wants: []string{"workload.think_time: not used by kind shared-prefix with turns 1"}},
		{name: "missing-path", cfg: Config{Workload: WorkloadConfig{Kind: KindMooncake}}, wants: []string{"workload.path"}},
		{name: "nan-rate", cfg: Config{Arrival: ArrivalConfig{Rate: nanValue()}}, wants: []string{"arrival.rate"}},
		{name: "inf-burstiness", cfg: Config{Arrival: ArrivalConfig{Process: ProcessGamma, Burstiness: infValue()}}, wants: []string{"arrival.burstiness"}},
		{name: "trace-needs-trace-kind", cfg: Config{Arrival: ArrivalConfig{Process: ProcessTrace}}, wants: []string{"trace needs a trace workload"}},
		{name: "burstiness-not-gamma", cfg: Config{Arrival: ArrivalConfig{Burstiness: 2}}, wants: []string{"only used by process gamma"}},
		{name: "normalize-needs-requests", cfg: Config{Arrival: ArrivalConfig{Normalize: true}}, wants: []string{"arrival.normalize"}},
		{name: "sharegpt-filters", cfg: Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: "x", MaxPromptTokens: 100, MaxTotalTokens: 50}},
			wants: []string{"workload.max_total_tokens"}},
		{name: "multi-turn-output-override", cfg: Config{Workload: WorkloadConfig{Kind: KindShareGPT, Path: "x", Mode: ModeMultiTurn, OutputTokens: 10}},
			wants: []string{"workload.output_tokens: not used by kind sharegpt in mode multi-turn"}},
		{name: "mean-turns-above-max", cfg: Config{Workload: WorkloadConfig{Kind: KindSyntheticChat, MeanTurns: 10, MaxTurns: 5}},
			wants: []string{"workload.mean_turns"}},
		{name: "mix", cfg: Config{Workload: WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{
			{Name: "a b", Workload: WorkloadConfig{Kind: KindSyntheticChat}},
			{Name: "x", Weight: -1, Workload: WorkloadConfig{Kind: KindMix}},
			{Name: "y", Weight: 2, Workload: WorkloadConfig{Kind: KindAzure}, Arrival: &ArrivalConfig{Process: ProcessTrace}},
			{Name: "y", Workload: WorkloadConfig{Groups: 0, QuestionTokens: -3}},
		}}}, wants: []string{"tenants[0].name", "tenants[1].workload.kind", "tenants[2].weight", "tenants[2].workload.path",
			"tenants[3].name: duplicate", "tenants[3].workload.question_tokens"}},
		{name: "tenant-arrival-never-ends", cfg: Config{Workload: WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{
			{Name: "calm", Workload: WorkloadConfig{Kind: KindSyntheticChat}},
			{Name: "flood", Workload: WorkloadConfig{Kind: KindSyntheticChat}, Arrival: &ArrivalConfig{Rate: 50}},
		}}, Arrival: ArrivalConfig{Stages: []StageConfig{{Rate: 5, Duration: time.Second}}}},
			wants: []string{"tenants[1].arrival: a tenant with its own arrival never ends"}},
		{name: "empty-mix", cfg: Config{Workload: WorkloadConfig{Kind: KindMix}}, wants: []string{"workload.tenants"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want errors")
			}
			for _, want := range tc.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %v\nwant a problem mentioning %q", err, want)
				}
			}
			if !strings.HasPrefix(err.Error(), "workloads: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestResolveIdempotentAndRoundTrips(t *testing.T) {
	cfgs := map[string]Config{
		"default":        {},
		"inference-perf": {Workload: WorkloadConfig{Preset: PresetInferencePerf, Turns: 3, ThinkTime: time.Second}},
		"chat":           {Workload: WorkloadConfig{Kind: KindSyntheticChat, SystemPrompts: 4}, Arrival: ArrivalConfig{Process: ProcessGamma}},
		"sharegpt":       {Workload: WorkloadConfig{Kind: KindShareGPT, Path: "d.json", Mode: ModeMultiTurn}},
		"trace":          {Workload: WorkloadConfig{Kind: KindMooncake, Path: "t.jsonl"}, Arrival: ArrivalConfig{TimeScale: 0.5}},
		"mix": {Workload: WorkloadConfig{Kind: KindMix, Tenants: []TenantConfig{
			{Name: "a", Workload: WorkloadConfig{Kind: KindAzure, Path: "a.csv"}, Arrival: &ArrivalConfig{}},
			{Name: "b", Workload: WorkloadConfig{Kind: KindSyntheticChat}},
		}}},
	}
	for name, c := range cfgs {
		t.Run(name, func(t *testing.T) {
			r := c.Resolve()
			if err := r.Validate(); err != nil {
				t.Fatalf("resolved config invalid: %v", err)
			}
			if diff := cmp.Diff(r, r.Resolve()); diff != "" {
				t.Errorf("Resolve not idempotent (-once +twice):\n%s", diff)
			}
			data, err := yaml.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseConfig(name, data)
			if err != nil {
				t.Fatalf("ParseConfig of marshalled config: %v\n%s", err, data)
			}
			if diff := cmp.Diff(r, back); diff != "" {
				t.Errorf("YAML round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func nanValue() float64 { z := 0.0; return z / z }
func infValue() float64 { z := 0.0; return 1 / z }
