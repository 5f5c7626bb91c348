package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"kvroute/internal/gateway"
	"kvroute/sim/cluster"
)

// TestKillOneOfThree kills one of three emulated replicas while 30 clients each send three
// non-streamed completions through the router. With the default failure rule no request is
// lost: every client gets a 200, the requests the dead replica was running finish on the
// others. With max_retries 0 no request reaches a backend twice, nor two backends; the
// requests the kill cut end in a 502.
func TestKillOneOfThree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
	}{{"default rule", gateway.DefaultConfig().Limits.MaxRetries}, {"max_retries 0", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			reps := startRecording(t, ctx, 3, 2)
			victim := reps[2]
			cut := make(chan struct{})
			var once sync.Once
			victim.mu.Lock()
			victim.onArrive = func(n int) { // mid-way: the victim is running a few requests
				if n >= 5 {
					once.Do(func() { close(cut) })
				}
			}
			victim.mu.Unlock()
			_, url := startRouter(t, ctx, reps, func(c *gateway.Config) { c.Limits.MaxRetries = tc.retries }, gateway.Options{})

			const clients, perClient = 30, 3
			results := make(chan faultResult, clients*perClient)
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					for k := range perClient {
						results <- send(url, fmt.Sprintf("c%d-r%d", c, k), false)
					}
				})
			}
			<-cut
			victim.kill()
			wg.Wait()
			close(results)

			moved, failed := checkKill(t, results, reps, tc.retries > 0)
			if moved == 0 && failed == 0 {
				t.Error("the kill cut no request: the test exercised nothing")
			}
			t.Logf("%d requests: %d moved to another replica, %d failed", clients*perClient, moved, failed)
		})
	}
}

// startRouter serves a least-request router in front of reps, named as the simulator names
// its replicas (replica-i), with the configuration changed by edit, until ctx ends; it
// returns the router and its URL.
func startRouter(t *testing.T, ctx context.Context, reps []*recordingReplica, edit func(*gateway.Config), opts gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	cfg := gateway.DefaultConfig()
	cfg.Policy = "least-request"
	for i, rr := range reps {
		cfg.Backends = append(cfg.Backends, cluster.EndpointID(i)+"="+rr.url())
	}
	cfg.Health.MetricsInterval, cfg.Health.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	edit(&cfg)
	gw, err := gateway.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	go gw.Run(ctx)
	front := httptest.NewServer(gw)
	t.Cleanup(front.Close)
	return gw, front.URL
}

// checkKill checks how the requests of a run with a replica killed ended, and returns how
// many reached two replicas and how many failed. With retries, every request ends in a 200;
// without, a request reaches at most one replica, and one that failed got a 502. Either way
// no replica receives a request twice and no request reaches more than two.
func checkKill(t *testing.T, results <-chan faultResult, reps []*recordingReplica, retries bool) (moved, failed int) {
	t.Helper()
	reached := map[string]int{}
	for i, rr := range reps {
		rr.mu.Lock()
		seen := map[string]bool{}
		for _, id := range rr.arrived {
			if seen[id] {
				t.Errorf("replica %d received %s twice", i, id)
			}
			seen[id] = true
			reached[id]++
		}
		rr.mu.Unlock()
	}
	for r := range results {
		switch n := reached[r.id]; {
		case n > 1 && !retries:
			t.Errorf("%s reached %d replicas with max_retries 0", r.id, n)
		case n > 2:
			t.Errorf("%s reached %d replicas: only one was killed", r.id, n)
		case n == 2:
			moved++
		}
		switch {
		case r.transport != nil:
			t.Errorf("%s: the client got a transport error: %v", r.id, r.transport)
		case r.status == http.StatusOK:
		case retries:
			t.Errorf("%s: status %d %q: the default rule loses no request to one dead replica", r.id, r.status, r.body)
		case r.status != http.StatusBadGateway:
			t.Errorf("%s: status %d %q, want 502 for a request the kill cut", r.id, r.status, r.body)
		default:
			failed++
		}
	}
	return moved, failed
}
