package cluster

import (
	"context"
	"testing"
	"time"

	"kvroute/results"
	"kvroute/router"
	"kvroute/workloads"
)

// firstTokenSpy is least-request that records the FirstToken calls it gets.
type firstTokenSpy struct {
	router.Policy
	at map[string][]time.Time
}

func (f *firstTokenSpy) FirstToken(req *router.Request, _ string, now time.Time) {
	f.at[req.ID] = append(f.at[req.ID], now)
}

// TestFirstTokenReachesPolicy checks that a policy that tracks prompt load hears of each
// completed request's first token once, when the client sees it (after the network delay).
func TestFirstTokenReachesPolicy(t *testing.T) {
	lr, err := router.Builtin().New("least-request", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	spy := &firstTokenSpy{Policy: lr, at: map[string][]time.Time{}}
	stream, err := workloads.Build(sharedPrefix(2, 40, 20), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var recs []results.Record
	cfg := Config{Replicas: fleet(2, 5000), Model: model, NetworkDelay: 3 * time.Millisecond}
	s, err := New(cfg, spy, stream, Sink{Record: func(r *results.Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 40 {
		t.Fatalf("%d records, want 40", len(recs))
	}
	for _, r := range recs {
		got := spy.at[r.ID]
		if len(got) != 1 || !got[0].Equal(Epoch.Add(r.FirstToken)) {
			t.Errorf("request %s: FirstToken calls at %v, want one at %v", r.ID, got, Epoch.Add(r.FirstToken))
		}
	}
}
