package router_test

import (
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

// snap builds a snapshot whose endpoints have the given in-flight counts.
func snap(inflight ...int) *router.Snapshot {
	eps := routertest.Endpoints(len(inflight), routertest.Model)
	for i, n := range inflight {
		eps[i].InFlight = n
	}
	return &router.Snapshot{Now: routertest.Epoch, Endpoints: eps}
}

func mustNew(t *testing.T, name string, params map[string]any) router.Policy {
	t.Helper()
	p, err := router.Builtin().New(name, params, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pick returns p's decision for req on s, numbered as a Lifecycle numbers decisions, so that
// passing it to Routed carries what the Pick computed.
func pick(t *testing.T, p router.Policy, req *router.Request, s *router.Snapshot) router.Decision {
	t.Helper()
	pickSeq++
	s.Seq = pickSeq
	d, err := p.Pick(req, s)
	if err != nil {
		t.Fatal(err)
	}
	d.Seq = s.Seq
	return d
}

// pickSeq numbers pick's decisions.
var pickSeq uint64

func TestLeastRequest(t *testing.T) {
	s := snap(3, 1, 2)
	s.Endpoints[1].Waiting = 5 // scraped queue counts too: 1+5 > 2
	req := &router.Request{Model: routertest.Model}
	if got := pick(t, mustNew(t, "least-request", nil), req, s).Index; got != 2 {
		t.Fatalf("least-request picked %d, want 2", got)
	}
}

func TestLeastRequestTiesAreRandom(t *testing.T) {
	p := mustNew(t, "least-request", nil)
	s := snap(0, 0, 5, 0)
	seen := map[int]int{}
	req := &router.Request{Model: routertest.Model}
	for range 300 {
		seen[pick(t, p, req, s).Index]++
	}
	if len(seen) != 3 || seen[2] != 0 {
		t.Fatalf("ties picked %v, want all of 0, 1, 3 and never 2", seen)
	}
}

func TestRoundRobinCycles(t *testing.T) {
	p := mustNew(t, "round-robin", nil)
	s := snap(0, 0, 0)
	s.Endpoints[1].Ready = false
	req := &router.Request{Model: routertest.Model}
	var got []int
	for range 4 {
		got = append(got, pick(t, p, req, s).Index)
	}
	want := []int{0, 2, 0, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("round-robin picks %v, want %v", got, want)
		}
	}
}

func TestPowerOfTwoNeverPicksTheWorst(t *testing.T) {
	p := mustNew(t, "power-of-two", nil)
	s := snap(0, 10, 20)
	req := &router.Request{Model: routertest.Model}
	for range 200 {
		if pick(t, p, req, s).Index == 2 {
			t.Fatal("power-of-two picked the most loaded of three endpoints")
		}
	}
}

func TestLeastKVCache(t *testing.T) {
	s := snap(0, 0, 0)
	s.Endpoints[0].KVUsage, s.Endpoints[1].KVUsage, s.Endpoints[2].KVUsage = 0.9, 0.2, 0.5
	req := &router.Request{Model: routertest.Model}
	if got := pick(t, mustNew(t, "least-kv-cache", nil), req, s).Index; got != 1 {
		t.Fatalf("least-kv-cache picked %d, want 1", got)
	}
}

func TestSessionAffinity(t *testing.T) {
	p := mustNew(t, "session-affinity", nil)
	s := snap(0, 0, 0, 0, 0)
	req := &router.Request{Model: routertest.Model, SessionKey: "conversation-17"}
	first := pick(t, p, req, s).Index
	s.Endpoints[first].InFlight = 100 // affinity ignores load
	for range 10 {
		if got := pick(t, p, req, s); got.Index != first || got.Reason != router.ReasonSessionHash {
			t.Fatalf("session moved from %d to %v", first, got)
		}
	}
	// Removing another endpoint must not move the session (rendezvous hashing).
	other := (first + 1) % len(s.Endpoints)
	s.Endpoints[other].Ready = false
	if got := pick(t, p, req, s).Index; got != first {
		t.Fatalf("session moved from %d to %d when endpoint %d left", first, got, other)
	}
	// Spread: 200 sessions over 5 endpoints land on every endpoint.
	s.Endpoints[other].Ready = true
	seen := map[int]bool{}
	for i := range 200 {
		r := &router.Request{Model: routertest.Model, SessionKey: "s" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		seen[pick(t, p, r, s).Index] = true
	}
	if len(seen) != 5 {
		t.Fatalf("200 sessions landed on %d of 5 endpoints", len(seen))
	}
	// No session key: least request.
	noKey := &router.Request{Model: routertest.Model}
	if got := pick(t, p, noKey, snap(4, 0, 4)); got.Index != 1 || got.Reason != router.ReasonNoSession {
		t.Fatalf("no session key: got %v, want least-request endpoint 1", got)
	}
}
