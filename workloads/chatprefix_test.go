package workloads

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestChatPrefixes checks KubeAI's chat benchmark: prompts × rounds requests, each prompt sent
// exactly rounds times, prompts of one conversation nested, the concurrency held until the
// list runs out, and the published mean lengths.
func TestChatPrefixes(t *testing.T) {
	tests := []struct {
		name                      string
		prompts, rounds, clients  int
		wantInLo, wantInHi, wantO float64
	}{
		{"kubeai defaults", 0, 0, 0, 700, 950, 76},
		{"small", 40, 3, 8, 0, math.Inf(1), 0}, // too few prompts for the means
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := WorkloadConfig{Kind: KindChatPrefixes, Prompts: tc.prompts, Rounds: tc.rounds, Concurrency: tc.clients}
			r := w.resolve()
			cfg := Config{Workload: w, Arrival: ArrivalConfig{Process: ProcessImmediate}, Requests: r.Prompts * r.Rounds}
			// Service time grows with the prompt, so clients finish out of step.
			service := func(q Request) time.Duration { return time.Duration(len(q.Tokens)) * time.Millisecond }
			maxInFlight := 0
			var reqs []Request
			s := mustBuild(t, cfg, 1, WithText(false))
			drive(t, s, service, func(q Request) {
				reqs = append(reqs, q)
				maxInFlight = max(maxInFlight, s.InFlight())
			})
			if len(reqs) != r.Prompts*r.Rounds {
				t.Fatalf("%d requests, want %d", len(reqs), r.Prompts*r.Rounds)
			}
			if maxInFlight != r.Concurrency {
				t.Errorf("at most %d clients in flight, want %d", maxInFlight, r.Concurrency)
			}
			sends := map[string]int{}
			var in, out float64
			for _, q := range reqs {
				sends[Words(q.Tokens)]++
				in += float64(len(q.Tokens))
				out += float64(q.OutputTokens)
			}
			if len(sends) != r.Prompts {
				t.Errorf("%d distinct prompts, want %d", len(sends), r.Prompts)
			}
			for p, n := range sends {
				if n != r.Rounds {
					t.Fatalf("a prompt of %d words was sent %d times, want %d", len(strings.Fields(p)), n, r.Rounds)
				}
			}
			n := float64(len(reqs))
			if m := in / n; m < tc.wantInLo || m > tc.wantInHi {
				t.Errorf("mean prompt %.0f tokens, want %.0f..%.0f (KubeAI measured 832)", m, tc.wantInLo, tc.wantInHi)
			}
			if m := out / n; tc.wantO > 0 && math.Abs(m/tc.wantO-1) > 0.1 {
				t.Errorf("mean output %.1f tokens, want %.0f ±10%%", m, tc.wantO)
			}
			checkNested(t, reqs)
		})
	}
}

// checkNested checks that every conversation's prompts are prefixes of its longest one.
func checkNested(t *testing.T, reqs []Request) {
	t.Helper()
	longest := map[string][]int32{}
	for _, q := range reqs {
		if len(q.Tokens) > len(longest[q.PrefixGroup]) {
			longest[q.PrefixGroup] = q.Tokens
		}
	}
	for _, q := range reqs {
		if l := longest[q.PrefixGroup]; !slices.Equal(l[:len(q.Tokens)], q.Tokens) {
			t.Fatalf("%s (group %s) is not a prefix of its conversation's longest prompt", q.ID, q.PrefixGroup)
		}
	}
	if len(longest) < 2 {
		t.Errorf("%d conversations, want several", len(longest))
	}
}

// TestChatPrefixesText checks that with text each request carries its conversation as
// alternating user and assistant messages ending with a user message, whose text is the
// request's Text, and that the stream is the same for the same seed.
func TestChatPrefixesText(t *testing.T) {
	cfg := Config{Workload: WorkloadConfig{Kind: KindChatPrefixes, Prompts: 30, Rounds: 2, Concurrency: 5},
		Arrival: ArrivalConfig{Process: ProcessPoisson, Rate: 100}, Requests: 60}
	run := func() []Request { return drive(t, mustBuild(t, cfg, 7), fixedService(time.Second), nil) }
	a, b := run(), run()
	if len(a) != 60 || len(b) != 60 {
		t.Fatalf("%d and %d requests, want 60", len(a), len(b))
	}
	for i, q := range a {
		if q.ID != b[i].ID || q.Text != b[i].Text || q.Arrival != b[i].Arrival {
			t.Fatalf("request %d differs between runs with the same seed", i)
		}
		var text strings.Builder
		contents := make([]string, len(q.Messages))
		for j, m := range q.Messages {
			want := RoleUser
			if j%2 == 1 {
				want = RoleAssistant
			}
			if m.Role != want {
				t.Fatalf("%s message %d is %s, want %s", q.ID, j, m.Role, want)
			}
			text.WriteString(m.Content)
			contents[j] = m.Content
		}
		if len(q.Messages)%2 != 1 || strings.Join(contents, " ") != q.Text || Words(q.Tokens) != text.String() {
			t.Fatalf("%s: %d messages, text and tokens disagree", q.ID, len(q.Messages))
		}
	}
}

func TestChatPrefixesValidate(t *testing.T) {
	tests := []struct {
		name string
		w    WorkloadConfig
		want string
	}{
		{"zero concurrency after default is fine", WorkloadConfig{Kind: KindChatPrefixes}, ""},
		{"negative prompts", WorkloadConfig{Kind: KindChatPrefixes, Prompts: -1}, "workload.prompts"},
		{"min turns above max", WorkloadConfig{Kind: KindChatPrefixes, MinTurns: 40, MaxTurns: 10}, "workload.min_turns"},
		{"field of another kind", WorkloadConfig{Kind: KindChatPrefixes, Groups: 3}, "workload.groups: not used"},
		{"answer tokens elsewhere", WorkloadConfig{Kind: KindSyntheticChat, AnswerTokens: 3}, "workload.answer_tokens: not used"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{Workload: tc.w}.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
