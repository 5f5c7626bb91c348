package workloads

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chatConfig is a small synthetic-chat workload with a think time.
func chatConfig(think time.Duration) Config {
	return Config{
		Workload: WorkloadConfig{Kind: KindSyntheticChat, MeanTurns: 4, SystemPrompts: 3,
			SystemPromptTokens: 64, PromptTokens: 40, OutputTokens: 30, ThinkTime: think},
		Arrival:  ArrivalConfig{Process: ProcessPoisson, Rate: 20},
		Requests: 300,
	}
}

func TestStreamDeterministic(t *testing.T) {
	run := func(seed uint64) []string {
		reqs := drive(t, mustBuild(t, chatConfig(time.Second), seed), fixedService(300*time.Millisecond), nil)
		return summarizeAll(reqs)
	}
	a, b := run(7), run(7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different streams (-first +second):\n%s", diff)
	}
	if c := run(8); cmp.Equal(a, c) {
		t.Error("different seeds gave the same stream")
	}
}

func TestClosedLoopSessions(t *testing.T) {
	const think = 2 * time.Second
	const service = 500 * time.Millisecond
	s := mustBuild(t, chatConfig(think), 1)
	reqs := drive(t, s, fixedService(service), nil)
	if len(reqs) != 300 {
		t.Fatalf("got %d requests, want the cap of 300", len(reqs))
	}
	prev := map[string]Request{}
	for _, r := range reqs {
		if r.Session == "" || r.ID != fmt.Sprintf("%s.%d", r.Session, r.Turn) {
			t.Fatalf("request %s: session %q turn %d do not match its ID", r.ID, r.Session, r.Turn)
		}
		checkAgreement(t, r)
		p, ok := prev[r.Session]
		if r.Turn == 0 {
			if ok {
				t.Fatalf("session %s starts twice", r.Session)
			}
			prev[r.Session] = r
			continue
		}
		if !ok || p.Turn != r.Turn-1 || !p.FollowUp {
			t.Fatalf("turn %s does not follow its previous turn", r.ID)
		}
		if want := p.Arrival + service + think; r.Arrival != want {
			t.Errorf("turn %s arrives at %v, want previous arrival + service + think = %v", r.ID, r.Arrival, want)
		}
		history := append(slices.Clone(p.Tokens), p.AnswerTokens...)
		if !slices.Equal(r.Tokens[:len(history)], history) {
			t.Errorf("turn %s does not start with the previous prompt and answer tokens", r.ID)
		}
		if !strings.HasPrefix(r.Text, p.Text+" "+Words(p.AnswerTokens)+" ") {
			t.Errorf("turn %s does not start with the previous prompt and answer text", r.ID)
		}
		if n := len(r.Messages); r.Messages[n-2].Role != RoleAssistant || r.Messages[n-1].Role != RoleUser {
			t.Errorf("turn %s messages do not end with assistant, user", r.ID)
		}
		prev[r.Session] = r
	}
	st := s.Stats()
	if st.Requests != 300 || st.Sessions != len(prev) {
		t.Errorf("stats = %+v, want 300 requests over %d sessions", st, len(prev))
	}
}

// checkAgreement checks that a request's text, messages and tokens describe one prompt.
func checkAgreement(t *testing.T, r Request) {
	t.Helper()
	var text strings.Builder
	contents := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		text.WriteString(m.Content)
		contents[i] = m.Content
	}
	if strings.Join(contents, " ") != r.Text {
		t.Errorf("%s: Text is not its messages joined by a space", r.ID)
	}
	if Words(r.Tokens) != text.String() {
		t.Errorf("%s: the messages are not the synthetic text of its tokens", r.ID)
	}
	if r.FollowUp && len(r.AnswerTokens) != r.OutputTokens {
		t.Errorf("%s: %d answer tokens, want OutputTokens = %d", r.ID, len(r.AnswerTokens), r.OutputTokens)
	}
}

func TestDoneVariants(t *testing.T) {
	cfg := Config{Workload: WorkloadConfig{Groups: 1, PromptsPerGroup: 1, Turns: 3, ThinkTime: time.Second,
		SystemPromptTokens: 8, QuestionTokens: 4, OutputTokens: 4}}
	tests := []struct {
		name      string
		done      Completion
		wantErr   bool
		wantNext  bool
		wantStart string // the answer text the next turn carries, when wantNext
	}{
		{name: "expected-answer", done: Completion{At: 5 * time.Second}, wantNext: true},
		{name: "live-text", done: Completion{At: 5 * time.Second, Text: "Real answer. "}, wantNext: true, wantStart: "Real answer. "},
		{name: "tokens", done: Completion{At: 5 * time.Second, Tokens: []int32{0, 1}}, wantNext: true, wantStart: "ba be "},
		{name: "failed", done: Completion{At: 5 * time.Second, Failed: true}},
		{name: "before-arrival", done: Completion{At: -1}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustBuild(t, cfg, 1)
			first, ok := s.Next()
			if !ok || !first.FollowUp {
				t.Fatalf("first request %+v, want a turn with a follow-up", first)
			}
			err := s.Done(first.ID, tc.done)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Done error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if s.InFlight() != 1 {
					t.Errorf("a rejected Done changed the session")
				}
				return
			}
			next, ok := s.Next()
			if ok != tc.wantNext {
				t.Fatalf("next turn present = %v, want %v", ok, tc.wantNext)
			}
			if !ok {
				return
			}
			if want := tc.done.At + time.Second; next.Arrival != want {
				t.Errorf("next turn at %v, want %v", next.Arrival, want)
			}
			rest := strings.TrimPrefix(next.Text, first.Text+" ") // the answer is the next message
			if tc.wantStart != "" && !strings.HasPrefix(rest, tc.wantStart) {
				t.Errorf("next turn continues with %q, want %q", rest, tc.wantStart)
			}
			if err := s.Done(first.ID, tc.done); err != nil {
				t.Errorf("second Done = %v, want nil", err)
			}
		})
	}
}

// TestAnswerTokensKeptWhenDoneDiffers: without text, a synthetic answer is drawn in the
// history's spare room; the next turn re-sends it when Done reports nothing else, and when
// Done reports other tokens, the next turn re-sends those while the AnswerTokens handed out
// keep their values.
func TestAnswerTokensKeptWhenDoneDiffers(t *testing.T) {
	cfg := Config{Workload: WorkloadConfig{Kind: KindSyntheticChat, MeanTurns: 4, MaxTurns: 4}, Arrival: ArrivalConfig{Rate: 1}}
	for _, reported := range [][]int32{nil, {7, 8, 9}} {
		s := mustBuild(t, cfg, 3, WithText(false))
		first, ok := s.Next()
		for ok && !first.FollowUp {
			if err := s.Done(first.ID, Completion{At: first.Arrival}); err != nil {
				t.Fatal(err)
			}
			first, ok = s.Next()
		}
		if !ok {
			t.Fatal("no request with a follow-up")
		}
		answer := slices.Clone(first.AnswerTokens)
		if err := s.Done(first.ID, Completion{At: first.Arrival + time.Second, Tokens: reported}); err != nil {
			t.Fatal(err)
		}
		var next Request
		for {
			if next, ok = s.Next(); !ok || next.Session == first.Session {
				break
			}
			_ = s.Done(next.ID, Completion{At: next.Arrival})
		}
		if !ok {
			t.Fatal("the session's next turn never came")
		}
		want := reported
		if want == nil {
			want = answer
		}
		if got := next.Tokens[len(first.Tokens):][:len(want)]; !slices.Equal(got, want) || !slices.Equal(next.Tokens[:len(first.Tokens)], first.Tokens) {
			t.Errorf("reported %v: the next turn continues with %v, want %v", reported, got, want)
		}
		if !slices.Equal(first.AnswerTokens, answer) {
			t.Errorf("reported %v: the AnswerTokens handed out changed", reported)
		}
	}
}

func TestStreamCaps(t *testing.T) {
	base := Config{Workload: WorkloadConfig{Kind: KindSyntheticChat, MeanTurns: 5}, Arrival: ArrivalConfig{Rate: 50}}
	t.Run("requests", func(t *testing.T) {
		c := base
		c.Requests = 123
		s := mustBuild(t, c, 1, WithText(false))
		if got := len(drive(t, s, fixedService(time.Second), nil)); got != 123 {
			t.Errorf("%d requests, want 123", got)
		}
		if st := s.Stats(); st.Cut == 0 {
			t.Errorf("stats %+v: want sessions cut by the cap", st)
		}
	})
	t.Run("duration", func(t *testing.T) {
		c := base
		c.Duration = 20 * time.Second
		s := mustBuild(t, c, 1, WithText(false))
		reqs := drive(t, s, fixedService(3*time.Second), nil)
		for _, r := range reqs {
			if r.Arrival >= c.Duration {
				t.Fatalf("request %s at %v, past the %v cap", r.ID, r.Arrival, c.Duration)
			}
		}
		if len(reqs) < 900 || s.Stats().Cut == 0 {
			t.Errorf("%d requests, stats %+v: want about 1000 sessions' turns and some cut", len(reqs), s.Stats())
		}
	})
}

func TestStreamConcurrentDone(t *testing.T) {
	s := mustBuild(t, chatConfig(0), 3, WithText(false))
	var wg sync.WaitGroup
	taken := 0
	for {
		req, ok := s.Next()
		if !ok {
			wg.Wait() // completions may schedule more turns
			if s.InFlight() == 0 {
				if _, ok := s.Peek(); !ok {
					break
				}
			}
			continue
		}
		taken++
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Done(req.ID, Completion{At: req.Arrival + time.Second}); err != nil {
				t.Error(err)
			}
			_ = s.InFlight()
		}()
	}
	if taken != 300 {
		t.Errorf("took %d requests, want 300", taken)
	}
}

// TestFollowQueueOrder pushes follow-ups in a random order, with tied arrivals, popping some
// on the way, and checks that they come out by (arrival, seq).
func TestFollowQueueOrder(t *testing.T) {
	r := newRand(5, 6)
	var q followQueue
	var got []followItem
	for seq := range uint64(500) {
		q.push(followItem{pending: pending{req: Request{Arrival: time.Duration(r.IntN(50))}}, seq: seq})
		if r.IntN(4) == 0 {
			got = append(got, q[0])
			q.pop()
		}
	}
	for len(q) > 0 {
		got = append(got, q[0])
		q.pop()
	}
	if len(got) != 500 {
		t.Fatalf("popped %d items, want 500", len(got))
	}
	// Check each popped item against the ones still queued when it was popped: replay.
	var ref []followItem
	r = newRand(5, 6)
	k := 0
	less := func(a, b followItem) int {
		if a.req.Arrival != b.req.Arrival {
			return int(a.req.Arrival - b.req.Arrival)
		}
		return int(a.seq) - int(b.seq)
	}
	popMin := func() {
		i := 0
		for j := range ref {
			if less(ref[j], ref[i]) < 0 {
				i = j
			}
		}
		if got[k].seq != ref[i].seq {
			t.Fatalf("pop %d: seq %d, want %d", k, got[k].seq, ref[i].seq)
		}
		k++
		ref = slices.Delete(ref, i, i+1)
	}
	for seq := range uint64(500) {
		ref = append(ref, followItem{pending: pending{req: Request{Arrival: time.Duration(r.IntN(50))}}, seq: seq})
		if r.IntN(4) == 0 {
			popMin()
		}
	}
	for len(ref) > 0 {
		popMin()
	}
}
