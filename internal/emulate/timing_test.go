package emulate

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/internal/openai"
	"kvroute/sim"
	"kvroute/sim/engine"
)

// refRun is what the bare engine does with the same requests, all submitted at time 0.
type refRun struct {
	tokens  [][]sim.Time // per request, the virtual time of each output token
	results []engine.Result
	preempt int64
}

// reference runs chat requests (one user message each, texts[i]) through a bare engine with
// cfg's deployment, submitted in order at
// time 0 (each running its time-0 events before the next arrives, as the replica's loop does), and derives each request's token times: the first at FirstToken, then one at each
// step end where the engine's generation counter says the request decoded. With one request
// or no preemption that is every step end while it runs.
func reference(t *testing.T, cfg Config, texts []string, outputs []int) refRun {
	t.Helper()
	d, err := cfg.deployment()
	if err != nil {
		t.Fatal(err)
	}
	k := sim.NewKernel()
	ref := refRun{tokens: make([][]sim.Time, len(texts)), results: make([]engine.Result, len(texts))}
	var eng *engine.Replica
	var running []int // requests past their first token, unfinished
	finished := map[int]bool{}
	eng, err = engine.New(k, engine.Config{Deployment: d, NumBlocks: cfg.NumBlocks, StepTime: cfg.StepTime}, engine.Hooks{
		FirstToken: func(r *engine.Request, at sim.Time) {
			i := r.Tag.(int)
			ref.tokens[i] = append(ref.tokens[i], at)
			running = append(running, i)
		},
		Done: func(res engine.Result) {
			i := res.Request.Tag.(int)
			ref.results[i] = res
			finished[i] = true
		},
		Step: func(at sim.Time, _ time.Duration, _ gpumodel.Step) {
			for _, i := range running {
				if n := len(ref.tokens[i]); n > 0 && ref.tokens[i][n-1] != at {
					ref.tokens[i] = append(ref.tokens[i], at)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		req := chatEngineRequest(text, outputs[i])
		req.ID, req.Tag = fmt.Sprint(i), i
		eng.Submit(&req)
		if err := k.Run(0); err != nil { // as the replica's loop does after each arrival
			t.Fatal(err)
		}
	}
	if err := k.Run(sim.Never); err != nil {
		t.Fatal(err)
	}
	ref.preempt = eng.Metrics().Preemptions
	return ref
}

// wallOffset is the wall time after the start at which virtual time v is reached.
func wallOffset(v sim.Time, speed float64) time.Duration {
	return time.Duration(math.Ceil(float64(v) / speed))
}

// chatEngineRequest is the engine request the replica makes of a chat request whose one user
// message is text.
func chatEngineRequest(text string, maxTokens int) engine.Request {
	return newStream(tokenizeChat([]openai.Message{{Role: "user", Content: text}}), maxTokens, true).req
}

func chatRequest(prompt string, maxTokens int) *http.Request {
	body := fmt.Sprintf(`{"max_tokens":%d,"stream":true,"messages":[{"role":"user","content":%q}]}`, maxTokens, prompt)
	return httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
}

// TestTokenTimesMatchEngine checks, in a synctest bubble where wall time is exact, that every
// streamed token of a lone request leaves at the wall time of the engine step that made it.
func TestTokenTimesMatchEngine(t *testing.T) {
	tests := []struct {
		name   string
		speed  float64
		step   time.Duration // 0: gpumodel pricing
		prompt int           // bytes
		out    int
	}{
		{"real time, priced", 1, 0, 4000, 20},
		{"ten times faster, priced", 10, 0, 40000, 12},
		{"half speed, fixed steps", 0.5, 7 * time.Millisecond, 64, 5},
		{"odd speed, priced", 3.7, 0, 100, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Speed = tc.speed
				if tc.step > 0 {
					cfg.StepTime = func(gpumodel.Step) time.Duration { return tc.step }
				}
				r, err := NewReplica(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				start := time.Now()
				prompt := strings.Repeat("abcdefgh", tc.prompt/8)
				rec := serve(r, chatRequest(prompt, tc.out))
				ref := reference(t, cfg, []string{prompt}, []int{tc.out})
				want := make([]time.Duration, tc.out)
				for i, v := range ref.tokens[0] {
					want[i] = wallOffset(v, tc.speed)
				}
				if got := ref.results[0].Finish; ref.tokens[0][tc.out-1] != got {
					t.Fatalf("reference: last token at %v, finish at %v", ref.tokens[0][tc.out-1], got)
				}
				if diff := cmp.Diff(want, tokenOffsets(t, rec, start)); diff != "" {
					t.Errorf("token write times after the start (-engine +served):\n%s", diff)
				}
				checkEngineTTFT(t, rec, ref.results[0])
			})
		})
	}
}

// checkEngineTTFT checks that a response carries the engine's time to first token, in
// virtual seconds, in its HeaderEngineTTFT.
func checkEngineTTFT(t *testing.T, rec *recorder, res engine.Result) {
	t.Helper()
	want := time.Duration(res.FirstToken - res.Arrival).Seconds()
	got, err := strconv.ParseFloat(rec.header.Get(HeaderEngineTTFT), 64)
	if err != nil || math.Abs(got-want) > 1e-6 {
		t.Errorf("%s: %q (%v), want %.6f s", HeaderEngineTTFT, rec.header.Get(HeaderEngineTTFT), err, want)
	}
}

// tokenOffsets returns when each token event of a recorded chat stream was written.
func tokenOffsets(t *testing.T, rec *recorder, start time.Time) []time.Duration {
	t.Helper()
	var got []time.Duration
	data, at := rec.events()
	for i, d := range data {
		if strings.Contains(d, `"content":"`) && !strings.Contains(d, `"content":""`) {
			got = append(got, at[i].Sub(start))
		}
	}
	return got
}

// TestPreemptionKeepsCountsAndFinish fills a small KV cache so the engine preempts, and checks
// that every stream still carries exactly its tokens, its first token at the engine's first
// token time and its last at the engine's finish time.
func TestPreemptionKeepsCountsAndFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.NumBlocks = 64
		r, err := NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		start := time.Now()
		const n = 8
		recs := make([]*recorder, n)
		texts, outs := make([]string, n), make([]int, n)
		done := make(chan struct{}, n)
		for i := range n {
			text := fmt.Sprintf("request %d: %s", i, strings.Repeat("lorem ipsum ", 30))
			texts[i], outs[i] = text, 150+10*i
			go func() {
				recs[i] = serve(r, chatRequest(text, outs[i]))
				done <- struct{}{}
			}()
			synctest.Wait() // submitted, in order
		}
		for range n {
			<-done
		}
		ref := reference(t, cfg, texts, outs)
		if ref.preempt == 0 {
			t.Fatal("the scenario caused no preemption")
		}
		for i, rec := range recs {
			got := tokenOffsets(t, rec, start)
			res := ref.results[i]
			if len(got) != outs[i] || res.OutputTokens != outs[i] {
				t.Fatalf("request %d: %d tokens streamed, engine made %d, want %d", i, len(got), res.OutputTokens, outs[i])
			}
			first, last := wallOffset(res.FirstToken, 1), wallOffset(res.Finish, 1)
			if got[0] != first || got[len(got)-1] != last {
				t.Errorf("request %d: first and last token at %v and %v, engine at %v and %v", i, got[0], got[len(got)-1], first, last)
			}
			checkEngineTTFT(t, rec, res)
			for j := 1; j < len(got); j++ {
				if got[j] < got[j-1] {
					t.Fatalf("request %d: token %d at %v before token %d at %v", i, j, got[j], j-1, got[j-1])
				}
			}
		}
	})
}

func TestSlowdown(t *testing.T) {
	const step = 10 * time.Millisecond
	tests := []struct {
		speed, factor float64
		wantFirst     time.Duration
		wantLast      time.Duration
	}{
		{1, 1, step, 5 * step},
		{1, 3, 3 * step, 15 * step},
		{10, 3, 3 * step / 10, 15 * step / 10},
		{1, 0.5, step / 2, 5 * step / 2},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("speed %v factor %v", tc.speed, tc.factor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Speed = tc.speed
				cfg.StepTime = func(gpumodel.Step) time.Duration { return step }
				r, err := NewReplica(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if err := r.SetSlowdown(tc.factor); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				got := tokenOffsets(t, serve(r, chatRequest("hello", 5)), start)
				if len(got) != 5 || got[0] != tc.wantFirst || got[4] != tc.wantLast {
					t.Errorf("token times %v, want 5 from %v to %v", got, tc.wantFirst, tc.wantLast)
				}
			})
		})
	}
}

// TestFailForRecovers checks the timed failure of POST /admin/fail?for=.
func TestFailForRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := NewReplica(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if rec := serve(r, httptest.NewRequest("POST", "/admin/fail?for=2s", nil)); rec.status != http.StatusOK {
			t.Fatalf("fail: status %d", rec.status)
		}
		if rec := serve(r, httptest.NewRequest("GET", "/health", nil)); !rec.aborted {
			t.Error("health answered while down")
		}
		time.Sleep(2*time.Second - time.Nanosecond) // fake time: still down
		if !r.Down() {
			t.Error("recovered early")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if rec := serve(r, httptest.NewRequest("GET", "/health", nil)); rec.aborted || rec.status != http.StatusOK {
			t.Errorf("health after recovery: aborted %v, status %d", rec.aborted, rec.status)
		}
	})
}
