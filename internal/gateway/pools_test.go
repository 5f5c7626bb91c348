package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/internal/vllm"
	"kvroute/router"
)

// TestPDPools checks that a P/D gateway keeps each backend in its own pool's lifecycle,
// whatever the configuration order: requests land on the backends their pools' policies
// picked, Backends reports the in-flight counters on those backends, and an ejected prefill
// backend gets no prefill leg until a good scrape re-admits it.
func TestPDPools(t *testing.T) {
	var last *spy // spyRegistry registers first-ready
	cfg := DefaultConfig()
	cfg.Policy = "first-ready"
	cfg.Backends = []string{"d0=http://127.0.0.1:1", "p0=http://127.0.0.1:2", "d1=http://127.0.0.1:3", "p1=http://127.0.0.1:4"}
	cfg.PD = PDConfig{Mode: PDTwoStep, Roles: map[string]string{"p0": RolePrefill, "p1": RolePrefill}}
	g, err := New(cfg, Options{Policies: spyRegistry(&last)})
	if err != nil {
		t.Fatal(err)
	}
	p0 := g.current.Load().backends[1]
	var held []*reservation
	for _, step := range []struct {
		name         string
		before       func()
		wantDecode   string
		wantPrefill  string
		wantInFlight map[string]int
	}{
		{"first", func() {}, "d0", "p0", map[string]int{"d0": 1, "p0": 1, "d1": 0, "p1": 0}},
		{"p0 ejected", func() { g.eject(p0, errors.New("refused")) }, "d0", "p1", map[string]int{"d0": 2, "p0": 1, "d1": 0, "p1": 1}},
		{"p0 re-admitted", func() {
			hc := g.current.Load().cfg.Health
			g.recordScrape(p0, vllm.Metrics{}, nil, time.Now(), time.Now(), hc)
		}, "d0", "p0", map[string]int{"d0": 3, "p0": 2, "d1": 0, "p1": 1}},
	} {
		step.before()
		c := &call{st: g.current.Load(), req: &router.Request{ID: step.name, InputTokens: 8, MaxOutputTokens: 8}}
		r, err := g.reserve(c, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		held = append(held, r)
		if r.b.name != step.wantDecode || c.prefill == nil || c.prefill.name != step.wantPrefill {
			t.Errorf("%s: decode %s, prefill %v: want %s and %s", step.name, r.b.name, c.prefill, step.wantDecode, step.wantPrefill)
		}
		if diff := cmp.Diff(step.wantInFlight, inFlightByName(g)); diff != "" {
			t.Errorf("%s: Backends' in-flight counts (-want +got):\n%s", step.name, diff)
		}
	}
	for _, r := range held {
		r.release(router.Usage{}, time.Now())
	}
	if diff := cmp.Diff(map[string]int{"d0": 0, "p0": 0, "d1": 0, "p1": 0}, inFlightByName(g)); diff != "" {
		t.Errorf("released: Backends' in-flight counts (-want +got):\n%s", diff)
	}
}

// inFlightByName is each backend's in-flight count as Backends reports it.
func inFlightByName(g *Gateway) map[string]int {
	got := map[string]int{}
	for _, b := range g.Backends() {
		got[b.Name] = b.InFlight
	}
	return got
}
