package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/internal/nettest"
)

// A router started late loads a peer's snapshot before it applies events, and is ready only
// then; one with no peer to load from reports the history it missed.
func TestLateRouterBootstrapsFromAPeer(t *testing.T) {
	const peer = "http://peer" // the running router's admin address, in the cases below
	cases := []struct {
		name       string
		peers      []string
		replay     bool
		wantLoaded int // blocks of the snapshot
		wantBlocks int // blocks held after one more message
		wantStale  float64
	}{
		{"from a peer", []string{"http://127.0.0.1:1", peer}, false, 5, 6, 0},
		{"from a peer, replay fills the gap after it", []string{peer}, true, 5, 6, 0},
		{"no peer answers: the replica's replay buffer holds the history", []string{"http://127.0.0.1:1"}, true, 0, 6, 0},
		{"no peer answers, no replay: stale", []string{"http://127.0.0.1:1"}, false, 0, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newKVHarness(t, "a")
			h.start(t, h.config("a"))
			h.publishUntil(t, "a", 0, 5, 5)
			admin := httptest.NewServer(h.g.AdminHandler())
			defer admin.Close()
			for i, p := range tc.peers {
				if p == peer {
					tc.peers[i] = admin.URL
				}
			}
			late := &kvHarness{reg: prometheus.NewRegistry(), fakes: h.fakes, pubs: h.pubs, addrs: h.addrs, replay: h.replay, sent: h.sent}
			cfg := late.config("a")
			cfg.KVEvents.BootstrapFrom = tc.peers
			if !tc.replay {
				cfg.KVEvents.Replay = nil
			}
			booted := make(chan KVBootstrap, 1)
			late.startOpts(t, cfg, Options{OnKVBootstrap: func(b KVBootstrap) { booted <- b }})
			b := <-booted
			if (b.Err == nil) != (tc.wantLoaded > 0) || b.Blocks != tc.wantLoaded {
				t.Errorf("bootstrap %+v", b)
			}
			late.publishUntil(t, "a", 10_000, 1, tc.wantBlocks) // the stream goes on: seq > 1
			if got := late.policy().blocks("a"); got != tc.wantBlocks {
				t.Errorf("policy holds %d blocks, want %d", got, tc.wantBlocks)
			}
			if got := gaugeValue(t, late.reg, "kvroute_gateway_kv_index_stale", "backend", "a"); got != tc.wantStale {
				t.Errorf("stale = %v, want %v", got, tc.wantStale)
			}
			if got := gaugeValue(t, late.reg, "kvroute_gateway_kv_index_behind_messages", "backend", "a"); (got > 0) != (tc.wantStale == 1) {
				t.Errorf("behind = %v messages", got)
			}
		})
	}
}

// While it loads a peer's snapshot the router is not ready: /ready answers 503 until the
// bootstrap ends, loaded or not, and the router serves no snapshot of its own meanwhile.
func TestReadyWaitsForTheBootstrap(t *testing.T) {
	h := newKVHarness(t, "a")
	answer := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-answer
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer peer.Close()
	cfg := h.config("a")
	cfg.KVEvents.BootstrapFrom = []string{peer.URL}
	booted := make(chan KVBootstrap, 1)
	h.startOpts(t, cfg, Options{OnKVBootstrap: func(b KVBootstrap) { booted <- b }})
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.g.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	nettest.WaitFor(t, "Run to start the bootstrap", h.g.kvIndex.Holding) // held until the peer answers
	if r, s := get("/ready"), get("/kv/snapshot"); r != 503 || s != 503 {
		t.Errorf("while bootstrapping: /ready %d, /kv/snapshot %d; want 503, 503", r, s)
	}
	close(answer)
	if b := <-booted; b.Err == nil {
		t.Errorf("bootstrap from a peer answering 503: %+v", b)
	}
	if r, s := get("/ready"), get("/kv/snapshot"); r != 200 || s != 200 {
		t.Errorf("after the bootstrap: /ready %d, /kv/snapshot %d; want 200, 200", r, s)
	}
}
