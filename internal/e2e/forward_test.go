package e2e

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/internal/nettest"
)

// TestPreciseRoutersBehindAForwarder runs replicas that dial their KV-event endpoint
// (cmd/emulate -kv-events-connect, as llm-d-inference-sim's --zmq-endpoint): router 0 binds
// it and forwards (kv_events.bind + forward), router 1 dials the forwarder, and router 2,
// started after the first load, bootstraps from router 0's snapshot. All three end with
// the same index, block for block, and none is stale.
func TestPreciseRoutersBehindAForwarder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 12 s of real time")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	in, out := "tcp://"+nettest.FreeAddr(t), "tcp://"+nettest.FreeAddr(t)
	addrs := []string{nettest.FreeAddr(t), nettest.FreeAddr(t)}
	urls := []string{"http://" + addrs[0], "http://" + addrs[1]}
	router := func(kv gateway.KVEventsConfig) *gateway.Gateway {
		cfg := gateway.DefaultConfig()
		cfg.Policy, cfg.Backends, cfg.DebugHeaders = "precise-prefix", urls, true
		kv.BlockSize, kv.BootstrapTimeout = 16, cfg.KVEvents.BootstrapTimeout
		cfg.KVEvents = kv
		gw, err := gateway.New(cfg, gateway.Options{OnKVError: func(err error) { t.Errorf("kv events: %v", err) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := gw.StartKVEvents(ctx); err != nil {
			t.Fatal(err)
		}
		go gw.Run(ctx)
		return gw
	}
	r0 := router(gateway.KVEventsConfig{Bind: in, Forward: out})
	r1 := router(gateway.KVEventsConfig{Connect: []string{out}})
	for _, addr := range addrs { // the replicas dial the endpoint router 0 binds
		cfg := emulate.DefaultConfig()
		cfg.Model, cfg.Speed, cfg.Addr = model, 1, addr
		cfg.KVEvents = emulate.KVEventsConfig{Endpoint: in}
		r, err := emulate.NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	waitReady(t, r0, 2)
	waitReady(t, r1, 2)
	front := roundRobin(t, r0, r1)
	first := runLive(t, front, selfWorkload(), 5)
	admin := httptest.NewServer(r0.AdminHandler())
	t.Cleanup(admin.Close)
	r2 := router(gateway.KVEventsConfig{Connect: []string{out}, BootstrapFrom: []string{admin.URL}})
	waitReady(t, r2, 2)
	nettest.WaitFor(t, "router 2's bootstrap", func() bool { return metricSum(t, scrape(t, r2), "kvroute_gateway_kv_bootstrapping", nil) == 0 })
	second := runLive(t, roundRobin(t, r0, r1, r2), selfWorkload(), 6)
	t.Logf("2 routers: %d/%d completed, hit %.3f; then 3 (one bootstrapped): %d/%d, hit %.3f",
		first.Completed, first.Requests, first.HitRate, second.Completed, second.Requests, second.HitRate)
	routers := []*gateway.Gateway{r0, r1, r2}
	nettest.WaitFor(t, "the routers' indexes to agree", func() bool {
		want := scrape(t, r0)
		for _, gw := range routers[1:] {
			got := scrape(t, gw)
			for _, be := range r0.Backends() {
				l := map[string]string{"backend": be.Name}
				n := metricSum(t, want, "kvroute_gateway_kv_index_blocks", l)
				if n == 0 || metricSum(t, got, "kvroute_gateway_kv_index_blocks", l) != n {
					return false
				}
			}
		}
		return true
	})
	for i, gw := range routers {
		body := scrape(t, gw)
		t.Logf("router %d: %v events, %v forwarded, %v loaded at start, %v stale", i, metricSum(t, body, "kvroute_gateway_kv_events_total", nil),
			metricSum(t, body, "kvroute_gateway_kv_forwarded_total", nil), metricSum(t, body, "kvroute_gateway_kv_bootstrap_blocks", nil),
			metricSum(t, body, "kvroute_gateway_kv_index_stale", nil))
		if stale := metricSum(t, body, "kvroute_gateway_kv_index_stale", nil); stale != 0 {
			t.Errorf("router %d: %v stale backends", i, stale)
		}
	}
	if n := metricSum(t, scrape(t, r2), "kvroute_gateway_kv_bootstrap_blocks", nil); n == 0 {
		t.Error("router 2 loaded no block from router 0's snapshot")
	}
}

// roundRobin serves the routers behind one front that spreads requests in turn.
func roundRobin(t *testing.T, routers ...*gateway.Gateway) string {
	t.Helper()
	var fronts []*url.URL
	for _, gw := range routers {
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		fronts = append(fronts, u)
	}
	var next atomic.Uint64
	lb := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(fronts[next.Add(1)%uint64(len(fronts))])
	}, FlushInterval: -1}
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)
	return front.URL
}
