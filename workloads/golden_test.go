package workloads

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// summarize renders a request as one line: everything but the content, which is reduced to
// lengths, hashes and the start of the text.
func summarize(r Request) string {
	h := uint64(14695981039346656037)
	for _, tok := range r.Tokens {
		h = mix64(h ^ uint64(uint32(tok)))
	}
	roles := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		roles[i] = string(m.Role[0])
	}
	head := r.Text
	if len(head) > 40 {
		head = head[:40]
	}
	return fmt.Sprintf("%s at=%v tenant=%q session=%q turn=%d group=%q in=%d out=%d follow=%v answer=%d tokens=%016x text=%016x msgs=%s head=%q",
		r.ID, r.Arrival, r.Tenant, r.Session, r.Turn, r.PrefixGroup, len(r.Tokens), r.OutputTokens, r.FollowUp,
		len(r.AnswerTokens), h, hashString(r.Text), strings.Join(roles, ""), head)
}

func summarizeAll(reqs []Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = summarize(r)
	}
	return out
}

// goldenCases are small workloads over the fixtures in testdata, one golden file each.
var goldenCases = []struct {
	name string
	yaml string
}{
	{"shared-prefix", "workload: {kind: shared-prefix, groups: 3, prompts_per_group: 2, system_prompt_tokens: 24, question_tokens: 6, output_tokens: 5}\narrival: {process: constant, rate: 4}\n"},
	{"shared-prefix-turns", "workload: {kind: shared-prefix, preset: inference-perf, groups: 2, prompts_per_group: 2, turns: 3, think_time: 1s}\narrival: {process: poisson, rate: 2}\nrequests: 12\n"},
	{"synthetic-chat", "workload: {kind: synthetic-chat, mean_turns: 2, prompt_tokens: 20, output_tokens: 10, system_prompts: 2, system_prompt_tokens: 16, think_time: 3s, think_dist: exponential}\narrival: {process: gamma, rate: 1, burstiness: 0.5}\nrequests: 15\n"},
	{"sharegpt-single", "workload: {kind: sharegpt, path: testdata/sharegpt_small.json}\narrival: {process: immediate}\n"},
	{"sharegpt-ordered", "workload: {kind: sharegpt, path: testdata/sharegpt_small.json, shuffle: false, output_tokens: 50}\narrival: {process: constant, rate: 1}\n"},
	{"sharegpt-multi-turn", "workload: {kind: sharegpt, path: testdata/sharegpt_small.json, mode: multi-turn, think_time: 2s, max_turns: 2}\narrival: {process: constant, rate: 0.5}\n"},
	{"mooncake", "workload: {kind: mooncake, path: testdata/mooncake_small.jsonl}\narrival: {process: trace, time_scale: 2}\n"},
	{"azure", "workload: {kind: azure, path: testdata/azure_small.csv}\n"},
	{"vidur", "workload: {kind: azure, path: testdata/vidur_small.csv}\narrival: {process: poisson, rate: 3}\n"},
	{"mix", "workload:\n  kind: mix\n  tenants:\n  - {name: chat, weight: 3, workload: {kind: synthetic-chat, mean_turns: 1, prompt_tokens: 8, output_tokens: 8}}\n" +
		"  - {name: docs, weight: 1, workload: {kind: shared-prefix, groups: 2, prompts_per_group: 2, system_prompt_tokens: 8, question_tokens: 4}}\n" +
		"  - {name: trace, workload: {kind: mooncake, path: testdata/mooncake_small.jsonl}, arrival: {process: trace}}\n" +
		"arrival: {process: poisson, rate: 4}\nduration: 3s\n"},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig(tc.name, []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			s := mustBuild(t, cfg, 42)
			got := strings.Join(summarizeAll(drive(t, s, fixedService(1500*time.Millisecond), nil)), "\n") + "\n"
			got += fmt.Sprintf("stats %+v\n", s.Stats())
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("stream differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}
