package routertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/router"
)

// Model is the model name the conformance suite's requests ask for.
const Model = "llama-3.1-8b"

// Conformance checks the contract every policy must keep: picks are eligible endpoints of the
// snapshot; ErrNoEndpoint when nothing is eligible; the same seed gives the same picks; the
// snapshot is not modified; concurrent Pick, Routed, Finished and Removed are race-free.
// newPolicy must return a fresh policy seeded with seed.
func Conformance(t *testing.T, newPolicy func(seed uint64) router.Policy) {
	t.Helper()
	t.Run("PicksEligible", func(t *testing.T) { testPicksEligible(t, newPolicy(1)) })
	t.Run("NoEndpoint", func(t *testing.T) { testNoEndpoint(t, newPolicy(1)) })
	t.Run("Deterministic", func(t *testing.T) { testDeterministic(t, newPolicy) })
	t.Run("NoMutation", func(t *testing.T) { testNoMutation(t, newPolicy(1)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newPolicy(1)) })
}

// mixedPool is a pool of 6 endpoints where 1 is not ready and 1 serves another model.
func mixedPool() *router.Snapshot {
	eps := Endpoints(6, Model)
	eps[1].Ready = false
	eps[4].Models = []string{"other-model"}
	return &router.Snapshot{Now: Epoch, Endpoints: eps}
}

// Drive runs reqs through p on s's endpoints by a Lifecycle, as a caller would: each request
// is decided, its first token comes back, and every third earlier request finishes; each
// endpoint's scraped Running follows its in-flight count. It returns the decisions (Seq
// cleared), failing the test on any error.
func Drive(t testing.TB, p router.Policy, s *router.Snapshot, reqs []router.Request) []router.Decision {
	t.Helper()
	l, err := router.NewLifecycle(p, s.Endpoints, router.LifecycleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []router.Decision
	tickets := make([]router.Ticket, len(reqs))
	now := s.Now
	for k := range reqs {
		now = now.Add(50 * time.Millisecond)
		l.Update(followInFlight)
		if err := l.Decide(&tickets[k], &reqs[k], now); err != nil {
			t.Fatalf("request %d: %v", k, err)
		}
		tickets[k].FirstToken(now)
		d := tickets[k].Decision()
		d.Seq = 0
		out = append(out, d)
		if k%3 == 2 {
			j := k - 2
			tickets[j].Finish(router.Usage{PromptTokens: reqs[j].InputTokens, CompletionTokens: 20}, now)
		}
	}
	return out
}

// followInFlight sets each endpoint's scraped Running to the router's in-flight count.
func followInFlight(eps []router.EndpointState) {
	for i := range eps {
		eps[i].Running = eps[i].InFlight
	}
}

func testPicksEligible(t *testing.T, p router.Policy) {
	s := mixedPool()
	for k, d := range Drive(t, p, s, Stream(7, 300, Model)) {
		if d.Index < 0 || d.Index >= len(s.Endpoints) {
			t.Fatalf("request %d: index %d outside the snapshot of %d", k, d.Index, len(s.Endpoints))
		}
		if e := s.Endpoints[d.Index]; !e.Ready || e.ID == "ep-4" {
			t.Fatalf("request %d: picked ineligible endpoint %s (ready=%v models=%v)", k, e.ID, e.Ready, e.Models)
		}
		if d.Reason == "" {
			t.Fatalf("request %d: empty decision reason", k)
		}
	}
}

func testNoEndpoint(t *testing.T, p router.Policy) {
	req := Stream(3, 1, Model)[0]
	down := Endpoints(3, Model)
	for i := range down {
		down[i].Ready = false
	}
	otherModel := Endpoints(3, "other-model")
	cases := []struct {
		name string
		eps  []router.EndpointState
	}{
		{"empty", nil},
		{"none-ready", down},
		{"none-serves-model", otherModel},
	}
	for _, tc := range cases {
		_, err := p.Pick(&req, &router.Snapshot{Now: Epoch, Endpoints: tc.eps})
		if !errors.Is(err, router.ErrNoEndpoint) {
			t.Errorf("%s: err = %v, want ErrNoEndpoint", tc.name, err)
		}
	}
}

func testDeterministic(t *testing.T, newPolicy func(uint64) router.Policy) {
	reqs := Stream(11, 400, Model)
	a := Drive(t, newPolicy(42), mixedPool(), reqs)
	b := Drive(t, newPolicy(42), mixedPool(), reqs)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different decisions (-first +second):\n%s", diff)
	}
}

func testNoMutation(t *testing.T, p router.Policy) {
	s := mixedPool()
	s.Endpoints[0].InFlight, s.Endpoints[2].Running, s.Endpoints[3].KVUsage = 5, 3, 0.5
	for _, req := range Stream(5, 100, Model) {
		before := Clone(s)
		if _, err := p.Pick(&req, s); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, s); diff != "" {
			t.Fatalf("Pick modified the snapshot (-before +after):\n%s", diff)
		}
	}
}

// testConcurrent drives one lifecycle from 8 goroutines, with first tokens, repeated ends,
// ejections and re-admissions, while KV events reach the policy from a ninth, as they do in
// the proxy.
func testConcurrent(t *testing.T, p router.Policy) {
	reqs := Stream(13, 800, Model)
	l, err := router.NewLifecycle(p, mixedPool().Endpoints, router.LifecycleConfig{MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tk router.Ticket
			for k := g; k < len(reqs); k += 8 {
				if err := l.Decide(&tk, &reqs[k], Epoch); err != nil {
					errs <- fmt.Errorf("goroutine %d request %d: %w", g, k, err)
					return
				}
				tk.FirstToken(Epoch)
				if k%5 == 0 {
					_ = tk.Retry(Epoch) // another endpoint, or the end of the ticket
				}
				tk.Finish(router.Usage{CompletionTokens: 5}, Epoch)
				tk.Finish(router.Usage{CompletionTokens: 5}, Epoch) // idempotent
				if k%97 == 0 {
					l.Eject("ep-5")
					l.Readmit("ep-5")
				}
			}
		}()
	}
	if kv, ok := p.(router.KVEventObserver); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 400 {
				kv.BlockStored(fmt.Sprintf("ep-%d", k%6), uint64(k), router.MediumGPU)
				if k%7 == 0 {
					kv.BlockRemoved(fmt.Sprintf("ep-%d", k%6), uint64(k-3), router.MediumGPU)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, e := range l.Endpoints() {
		if e.InFlight != 0 || e.InFlightTokens != 0 {
			t.Errorf("%s: %d requests, %d tokens still in flight after every request finished", e.ID, e.InFlight, e.InFlightTokens)
		}
	}
}
