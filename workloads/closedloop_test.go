package workloads

import (
	"strings"
	"testing"
	"time"
)

// TestClosedLoopSharedPrefix drives shared-prefix closed-loop clients and checks the loop:
// exactly concurrency requests in flight once every client has started, each client's next
// request sent the instant its previous one finishes, every prompt of a finite list sent
// once, and the cap ending clients that draw prompts forever.
func TestClosedLoopSharedPrefix(t *testing.T) {
	yes := true
	tests := []struct {
		name        string
		w           WorkloadConfig
		arrival     ArrivalConfig
		requests    int
		wantClients int // distinct sessions
		wantReqs    int
	}{
		{"finite list, all start at once", WorkloadConfig{Groups: 6, PromptsPerGroup: 5, Concurrency: 4},
			ArrivalConfig{Process: ProcessImmediate}, 0, 4, 30},
		{"more clients than prompts", WorkloadConfig{Groups: 2, PromptsPerGroup: 3, Concurrency: 10},
			ArrivalConfig{Process: ProcessImmediate}, 0, 6, 6},
		{"repeat, ended by the requests cap", WorkloadConfig{Groups: 3, PromptsPerGroup: 2, Concurrency: 5, Repeat: &yes},
			ArrivalConfig{Process: ProcessImmediate}, 200, 5, 200},
		{"poisson starts", WorkloadConfig{Groups: 8, PromptsPerGroup: 8, Concurrency: 7},
			ArrivalConfig{Process: ProcessPoisson, Rate: 2}, 0, 7, 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.w.Kind, tc.w.SystemPromptTokens, tc.w.QuestionTokens, tc.w.OutputTokens = KindSharedPrefix, 40, 8, 4
			cfg := Config{Workload: tc.w, Arrival: tc.arrival, Requests: tc.requests}
			// Service time differs by prompt, so clients fall out of step.
			service := func(q Request) time.Duration {
				return time.Duration(1+int(q.Tokens[len(q.Tokens)-1])%5) * time.Second
			}
			s := mustBuild(t, cfg, 11, WithText(false))
			finish := map[string]time.Duration{} // a session's previous request's end
			last := map[string]int{}             // a session's previous turn
			prompts := map[string]int{}
			var spans [][2]time.Duration // every request's arrival and end
			var lastStart time.Duration
			drive(t, s, service, func(q Request) {
				if q.Turn == 0 {
					lastStart = q.Arrival
				} else {
					if at := finish[q.Session]; q.Arrival != at {
						t.Fatalf("%s arrives at %v, its client's previous request ended at %v", q.ID, q.Arrival, at)
					}
					if last[q.Session] != q.Turn-1 {
						t.Fatalf("%s follows turn %d", q.ID, last[q.Session])
					}
				}
				last[q.Session], finish[q.Session] = q.Turn, q.Arrival+service(q)
				spans = append(spans, [2]time.Duration{q.Arrival, q.Arrival + service(q)})
				prompts[Words(q.Tokens)]++
			})
			if len(spans) != tc.wantReqs || len(last) != tc.wantClients {
				t.Fatalf("%d requests from %d clients, want %d from %d", len(spans), len(last), tc.wantReqs, tc.wantClients)
			}
			end := spans[len(spans)-1][0]
			for _, sp := range spans {
				n := inFlightAt(spans, sp[0])
				if n > tc.wantClients {
					t.Fatalf("%d requests in flight at %v, more than the %d clients", n, sp[0], tc.wantClients)
				}
				if sp[0] >= lastStart && sp[0] < end && n != tc.wantClients {
					t.Fatalf("%d requests in flight at %v, want %d", n, sp[0], tc.wantClients)
				}
			}
			if tc.w.Repeat == nil {
				for p, k := range prompts {
					if k != 1 {
						t.Fatalf("a prompt of %d words sent %d times, want once", len(strings.Fields(p)), k)
					}
				}
			}
		})
	}
}

// inFlightAt counts the spans that hold t: sent at or before it and not yet ended.
func inFlightAt(spans [][2]time.Duration, t time.Duration) int {
	n := 0
	for _, sp := range spans {
		if sp[0] <= t && t < sp[1] {
			n++
		}
	}
	return n
}

// TestClosedLoopSameAsOpenLoopPrompts checks that closed-loop clients send the open-loop
// stream's prompts in the same order: the loop changes when requests are sent, not what.
func TestClosedLoopSameAsOpenLoopPrompts(t *testing.T) {
	w := WorkloadConfig{Kind: KindSharedPrefix, Groups: 5, PromptsPerGroup: 4, SystemPromptTokens: 32, QuestionTokens: 8}
	open := drive(t, mustBuild(t, Config{Workload: w}, 5), fixedService(time.Second), nil)
	w.Concurrency = 3
	closed := drive(t, mustBuild(t, Config{Workload: w, Arrival: ArrivalConfig{Process: ProcessImmediate}}, 5),
		fixedService(time.Second), nil)
	if len(open) != len(closed) {
		t.Fatalf("%d open-loop requests, %d closed-loop", len(open), len(closed))
	}
	for i := range open {
		if open[i].Text != closed[i].Text || open[i].PrefixGroup != closed[i].PrefixGroup {
			t.Fatalf("request %d: open-loop %q (%s), closed-loop %q (%s)", i,
				open[i].Text[:20], open[i].PrefixGroup, closed[i].Text[:20], closed[i].PrefixGroup)
		}
		if m := closed[i].Messages; len(m) != 2 || m[0].Role != RoleSystem || m[1].Role != RoleUser {
			t.Fatalf("request %d: messages %v, want the system prompt and the question", i, m)
		}
	}
	again := drive(t, mustBuild(t, Config{Workload: w, Arrival: ArrivalConfig{Process: ProcessImmediate}}, 5),
		fixedService(time.Second), nil)
	for i := range closed {
		if closed[i].ID != again[i].ID || closed[i].Arrival != again[i].Arrival || closed[i].Text != again[i].Text {
			t.Fatalf("request %d differs between runs with the same seed", i)
		}
	}
}

func TestClosedLoopValidate(t *testing.T) {
	yes := true
	sp := func(w WorkloadConfig) WorkloadConfig { w.Kind = KindSharedPrefix; return w }
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"ok", Config{Workload: sp(WorkloadConfig{Concurrency: 45})}, ""},
		{"negative", Config{Workload: sp(WorkloadConfig{Concurrency: -1})}, "workload.concurrency: must be in 0..1000000"},
		{"with turns", Config{Workload: sp(WorkloadConfig{Concurrency: 4, Turns: 2})}, "workload.concurrency: not used by kind shared-prefix"},
		{"repeat without a cap", Config{Workload: sp(WorkloadConfig{Concurrency: 4, Repeat: &yes})}, "workload.concurrency: with repeat"},
		{"repeat with a cap", Config{Workload: sp(WorkloadConfig{Concurrency: 4, Repeat: &yes}), Duration: time.Minute}, ""},
		{"stages", Config{Workload: sp(WorkloadConfig{Concurrency: 4}), Requests: 10,
			Arrival: ArrivalConfig{Stages: []StageConfig{{Rate: 1, Duration: time.Second}}}}, "arrival.stages: not used with workload.concurrency"},
		{"another kind", Config{Workload: WorkloadConfig{Kind: KindSyntheticChat, Concurrency: 4}}, "workload.concurrency: not used by kind synthetic-chat"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
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
