package router_test

import (
	"testing"
	"time"

	"kvroute/router"
	"kvroute/router/routertest"
)

func TestVTCSeparatesHeavyAndLightTenants(t *testing.T) {
	p := mustNew(t, "vtc-basic", map[string]any{"variant": "real-usage"})
	obs := p.(router.Observer)
	s := snap(0, 0, 0, 0)
	now := routertest.Epoch
	light := &router.Request{ID: "a1", Model: routertest.Model, Tenant: "light", InputTokens: 1000}
	heavy := &router.Request{ID: "b1", Model: routertest.Model, Tenant: "heavy", InputTokens: 5000}
	obs.Routed(light, router.Decision{}, "ep-0", now)
	obs.Routed(heavy, router.Decision{}, "ep-0", now)
	// bucket = max(1000, (1000+5000)/2) = 3000: light → 0.33 → endpoint 0; heavy → 1.67 → endpoint 2.
	for range 20 {
		if got := pick(t, p, light, s); got.Index != 0 || got.Reason != router.ReasonFairness {
			t.Fatalf("light tenant: %+v, want endpoint 0", got)
		}
		if got := pick(t, p, heavy, s).Index; got != 2 {
			t.Fatalf("heavy tenant: endpoint %d, want 2", got)
		}
	}
	// A saturated endpoint (running ≥ max_pod_load) costs 1 more: heavy moves to endpoint 1.
	s.Endpoints[2].Running = 100
	if got := pick(t, p, heavy, s).Index; got != 1 {
		t.Fatalf("heavy tenant with endpoint 2 saturated: endpoint %d, want 1", got)
	}
	// After the 5-minute window the counts expire and heavy is back at endpoint 0.
	s.Endpoints[2].Running = 0
	s.Now = now.Add(7 * time.Minute)
	if got := pick(t, p, heavy, s).Index; got != 0 {
		t.Fatalf("heavy tenant after the window: endpoint %d, want 0", got)
	}
}

func TestVTCChargesOutputOncePerRequest(t *testing.T) {
	p := mustNew(t, "vtc-basic", map[string]any{"variant": "real-usage"})
	obs := p.(router.Observer)
	s := snap(0, 0, 0, 0, 0)
	now := routertest.Epoch
	ref := &router.Request{ID: "d", Model: routertest.Model, Tenant: "ref", InputTokens: 1000}
	obs.Routed(ref, router.Decision{}, "ep-0", now)
	c := &router.Request{ID: "c", Model: routertest.Model, Tenant: "c", InputTokens: 1}
	obs.Routed(c, router.Decision{}, "ep-0", now)
	obs.Finished(c, "ep-0", router.Usage{CompletionTokens: 1000}, now)
	obs.Finished(c, "ep-0", router.Usage{CompletionTokens: 1000}, now) // duplicate: ignored
	// c = 1 + 2×1000 = 2001, ref = 1000: bucket 1500.5, c → 1.33 → endpoint 1.
	// Counted twice it would be 4001: bucket 2500.5 → 1.6 → endpoint 2.
	if got := pick(t, p, c, s).Index; got != 1 {
		t.Fatalf("tenant c: endpoint %d, want 1 (output charged once)", got)
	}
}

func TestVTCNoTenantIsRandom(t *testing.T) {
	p := mustNew(t, "vtc-basic", nil)
	if got := pick(t, p, &router.Request{Model: routertest.Model}, snap(0, 0)); got.Reason != router.ReasonNoTenantRandom {
		t.Fatalf("reason %q, want %q", got.Reason, router.ReasonNoTenantRandom)
	}
}
