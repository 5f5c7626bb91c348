package loadgen

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"kvroute/results"
	"kvroute/workloads"
)

// sendRate is the rate at which results were sent: the inverse of the least-squares slope
// of send time against send order, which one late straggler barely moves.
func sendRate(rs []*Result) float64 {
	var arr []time.Duration
	for _, r := range rs {
		arr = append(arr, r.Record.Arrival)
	}
	slices.Sort(arr)
	n := float64(len(arr))
	var sx, sy, sxx, sxy float64
	for i, a := range arr {
		x, y := float64(i), a.Seconds()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxx - sx*sx) / (n*sxy - sx*sy)
}

func TestRateHeldWhenServerIsSlow(t *testing.T) {
	cases := []struct {
		name           string
		rate           float64
		n              int
		serviceFactor  float64 // service time per request, in inter-arrival times
		maxConcurrency int
	}{
		{"10x inter-arrival", 50, 200, 10, 0},
		{"100x inter-arrival", 200, 400, 100, 0},
		{"capped concurrency does not delay the dispatcher", 50, 100, 10, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gap := time.Duration(float64(time.Second) / tc.rate)
				f := &fakeLLM{delay: time.Duration(tc.serviceFactor * float64(gap))}
				o := Options{Target: pipeTarget, Model: "m", Client: servePipe(t, f), MaxConcurrency: tc.maxConcurrency}
				rs, st, err := collect(t, context.Background(), o, mustStream(t, sharedPrefix(tc.n, tc.rate, 1)))
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) != tc.n || st.Sent != tc.n {
					t.Fatalf("got %d results, %d sent; want %d", len(rs), st.Sent, tc.n)
				}
				if got := st.Lag.Quantile(1); got > gap/20 {
					t.Errorf("dispatch lag up to %v; want under %v", got, gap/20)
				}
				if tc.maxConcurrency > 0 {
					if f.peak > tc.maxConcurrency {
						t.Errorf("server saw %d requests at once; cap %d", f.peak, tc.maxConcurrency)
					}
					return
				}
				if got := sendRate(rs); math.Abs(got-tc.rate) > 0.05*tc.rate {
					t.Errorf("sent at %.2f req/s; want %.0f ± 5%%", got, tc.rate)
				}
				if f.peak < int(tc.serviceFactor)/2 {
					t.Errorf("server saw at most %d requests at once; the load was not open-loop", f.peak)
				}
			})
		})
	}
}

// TestRateHeldOnLoopback runs over real sockets against a server that answers nothing until
// every request has been sent: a saturated target must not slow the dispatcher. That the run
// ends at all shows it (a dispatcher waiting for an answer would never send the last
// request); the schedule's precision is TestRateHeldWhenServerIsSlow's, on a virtual clock.
// On the wall clock a busy machine can only make sending late, so here the rate is held to
// the schedule from above: never sent faster than the arrivals.
func TestRateHeldOnLoopback(t *testing.T) {
	const n, rate = 100, 50.0
	release := make(chan struct{})
	f := &fakeLLM{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	sent := 0
	var once sync.Once
	var rs []*Result
	st, err := Run(context.Background(), Options{Target: srv.URL, Model: "m"}, mustStream(t, sharedPrefix(n, rate, 1)), Sink{
		Sent: func(*workloads.Request) {
			if sent++; sent == n {
				once.Do(func() { close(release) })
			}
		},
		Result: func(r *Result) { rs = append(rs, r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != n || st.Sent != n {
		t.Fatalf("got %d results, %d sent; want %d", len(rs), st.Sent, n)
	}
	if got := sendRate(rs); got > 1.05*rate {
		t.Errorf("sent at %.2f req/s; want at most %.0f + 5%%", got, rate)
	}
	for _, r := range rs {
		if r.Record.Status != results.StatusCompleted {
			t.Errorf("%s: %s %s", r.Record.ID, r.Record.Status, r.Record.Error)
		}
	}
}

func TestWarmupExcluded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := sharedPrefix(30, 10, 1)
		o := Options{Target: pipeTarget, Model: "m", Client: servePipe(t, &fakeLLM{}), Warmup: time.Second}
		rs, st, err := collect(t, context.Background(), o, mustStream(t, cfg))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		ref := mustStream(t, cfg)
		for r, ok := ref.Next(); ok; r, ok = ref.Next() {
			if r.Arrival < time.Second {
				want++
			}
		}
		warm := 0
		for _, r := range rs {
			if r.Warmup != (r.Scheduled < time.Second) {
				t.Errorf("%s scheduled at %v: warmup %v", r.Record.ID, r.Scheduled, r.Warmup)
			}
			if r.Warmup {
				warm++
			}
		}
		if warm != want || st.Warmup != want || len(rs) != 30 {
			t.Errorf("warm-up results %d (stats %d) of %d; want %d of 30", warm, st.Warmup, len(rs), want)
		}
	})
}

func TestTimeoutAndCancel(t *testing.T) {
	cases := []struct {
		name       string
		timeout    time.Duration
		cancelAt   time.Duration
		wantStatus results.Status
		wantErr    string
	}{
		{"per-request timeout", 2 * time.Second, 0, results.StatusTimedOut, "timeout"},
		{"run cancelled", 0, 3 * time.Second, results.StatusFailed, "canceled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeLLM{delay: time.Hour}
				o := Options{Target: pipeTarget, Model: "m", Client: servePipe(t, f), RequestTimeout: tc.timeout}
				ctx := context.Background()
				if tc.cancelAt > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.cancelAt)
					defer cancel()
				}
				rs, _, err := collect(t, ctx, o, mustStream(t, sharedPrefix(4, 10, 3)))
				if tc.cancelAt > 0 && err == nil {
					t.Error("Run returned no error after cancellation")
				}
				if len(rs) == 0 {
					t.Fatal("no results")
				}
				byID(t, rs)
				for _, r := range rs {
					if r.Record.Status != tc.wantStatus || !contains(r.Record.Error, tc.wantErr) {
						t.Errorf("%s: %s %q; want %s %q", r.Record.ID, r.Record.Status, r.Record.Error, tc.wantStatus, tc.wantErr)
					}
					if r.Record.Turn != 0 {
						t.Errorf("%s: a failed turn must end its session", r.Record.ID)
					}
				}
			})
		})
	}
}

// TestMultiTurnCarriesAnswer checks that each follow-up turn's history holds the answer the
// server actually sent for the turn before.
func TestMultiTurnCarriesAnswer(t *testing.T) {
	var mu sync.Mutex
	answers := map[string]string{} // session/turn -> answer sent
	f := &fakeLLM{}
	f.answer = func(r *received) []string {
		sess := r.header.Get(HeaderSession)
		words := []string{"reply ", "to ", sess + " ", "after ", string(rune('a'+len(r.req.Messages))) + " "}
		mu.Lock()
		answers[sess+"#"+string(rune('0'+len(r.req.Messages)))] = "reply to " + sess + " after " + string(rune('a'+len(r.req.Messages))) + " "
		mu.Unlock()
		return words
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	rs, _, err := collect(t, context.Background(), Options{Target: srv.URL, Model: "m"}, mustStream(t, sharedPrefix(12, 50, 3)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Record.Status != results.StatusCompleted {
			t.Fatalf("%s: %s %s", r.Record.ID, r.Record.Status, r.Record.Error)
		}
	}
	follow := 0
	for _, rc := range f.requests() {
		msgs := rc.req.Messages
		sess := rc.header.Get(HeaderSession)
		for i, m := range msgs {
			if m.Role != "assistant" {
				continue
			}
			follow++
			mu.Lock()
			want := answers[sess+"#"+string(rune('0'+i))]
			mu.Unlock()
			if m.Content != want {
				t.Errorf("session %s message %d: history holds %q; the server answered %q", sess, i, m.Content, want)
			}
		}
	}
	if follow == 0 {
		t.Error("no follow-up turn carried an answer")
	}
}
